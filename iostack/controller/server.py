"""Controller service entry point (placeholder until the controller lands).

Started by the all-in-one as ``python -m iostack.controller.server --config FILE``
where FILE is JSON with ``host``, ``port``, ``redis_url``, ``amqp_url``,
``admin_token`` and ``state_dir``. Serves ``GET /v1/health``.
"""

from __future__ import annotations

import argparse
import json

from flask import Flask, jsonify


def create_app(config: dict) -> Flask:
    app = Flask("iostack.controller")

    @app.get("/v1/health")
    def health():
        return jsonify(status="ok")

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="IOStack controller")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as f:
        config = json.load(f)
    create_app(config).run(host=config["host"], port=config["port"], threaded=True)


if __name__ == "__main__":
    main()
