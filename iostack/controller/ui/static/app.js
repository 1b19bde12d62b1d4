// IOStack console: htmx's CSRF header, and the live metric charts (uPlot), polled every
// metric interval. No inline script anywhere: the Content-Security-Policy forbids it.
"use strict";

document.addEventListener("htmx:configRequest", (event) => {
  const meta = document.querySelector('meta[name="csrf-token"]');
  if (meta) event.detail.headers["X-CSRF-Token"] = meta.content;
});

const KEEP = 300; // points kept per chart

function liveMetrics(section) {
  const charts = JSON.parse(section.dataset.charts);
  const url = section.dataset.url;
  const target = section.dataset.target;
  const xs = [];
  const ys = charts.map(() => []);
  let since = null;
  let thresholds = {};
  let events = [];
  let seconds = 1;

  function overlay(metric) {
    // Dynamic policies' thresholds (dashed) and actors' enforce/revert markers (vertical).
    return (u) => {
      const ctx = u.ctx;
      const { left, top, width, height } = u.bbox;
      ctx.save();
      ctx.font = `${12 * devicePixelRatio}px sans-serif`;
      for (const t of thresholds[metric] || []) {
        const y = u.valToPos(t.value, "y", true);
        ctx.strokeStyle = "#b3261e";
        ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
        ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(left + width, y); ctx.stroke();
        ctx.fillStyle = "#b3261e";
        ctx.fillText(`${t.policy} ${t.op} ${t.value}`, left + 4, y - 4);
      }
      ctx.setLineDash([]);
      for (const e of events) {
        if (!xs.length || e.time < xs[0]) continue;
        const x = Math.min(u.valToPos(e.time, "x", true), left + width);
        ctx.strokeStyle = e.state === "enforced" ? "#1e7b34" : "#5f6368";
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
        ctx.fillStyle = ctx.strokeStyle;
        ctx.fillText(`${e.policy} ${e.state}`, x + 3, top + 12 * devicePixelRatio);
      }
      ctx.restore();
    };
  }

  const plots = charts.map((c, i) => {
    const el = document.getElementById(`plot-${c.metric}`);
    return new uPlot({
      width: Math.max(el.clientWidth, 200), height: 180,
      series: [{}, { label: c.metric, stroke: "#1a5fb4", width: 2, spanGaps: false }],
      scales: {
        x: { time: true },
        y: { range: (u, min, max) => {
          const marks = (thresholds[c.metric] || []).map((t) => t.value);
          return [0, Math.max(max || 0, ...marks.map((m) => m * 1.25), 1)];
        } },
      },
      legend: { show: false },
      // One line of clock time per tick: uPlot's default second line (the date)
      // was cut off at this height, and a chart spans minutes, not days.
      axes: [{ space: 70, values: (u, splits) => splits.map((v) => new Date(v * 1000)
        .toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" })) },
      {}],
      hooks: { draw: [overlay(c.metric)] },
    }, [xs, ys[i]], el);
  });

  new ResizeObserver(() => {
    plots.forEach((p, i) => {
      const el = document.getElementById(`plot-${charts[i].metric}`);
      p.setSize({ width: Math.max(el.clientWidth, 200), height: 180 });
    });
  }).observe(section);

  function showActors(actors) {
    const list = document.getElementById("actors");
    list.replaceChildren(...actors.map((a) => {
      const li = document.createElement("li");
      li.dataset.policy = a.policy;
      li.dataset.state = a.state;
      li.textContent = `${a.policy} (${a.target}): ${a.state}`;
      li.title = a.text;
      return li;
    }));
  }

  async function poll() {
    try {
      const query = new URLSearchParams({ target });
      if (since !== null) query.set("since", since);
      const response = await fetch(`${url}?${query}`, { credentials: "same-origin" });
      if (response.status === 401) { location.reload(); return; }
      if (response.ok) {
        const data = await response.json();
        thresholds = data.thresholds;
        events = data.events;
        seconds = data.seconds || seconds;
        for (const point of data.points) {
          xs.push(point[0]);
          charts.forEach((c, i) => ys[i].push(point[i + 1]));
          since = point[0];
        }
        if (xs.length > KEEP) {
          xs.splice(0, xs.length - KEEP);
          ys.forEach((y) => y.splice(0, y.length - KEEP));
        }
        charts.forEach((c, i) => {
          plots[i].setData([xs, ys[i]]);
          const last = ys[i].length ? ys[i][ys[i].length - 1] : null;
          document.getElementById(`now-${c.metric}`).value = last === null ? "–" : String(last);
        });
        showActors(data.actors);
        if (since !== null) {
          document.getElementById("updated").textContent =
            `updated ${new Date(since * 1000).toLocaleTimeString()}`;
        }
      }
    } finally {
      setTimeout(poll, Math.max(seconds, 0.5) * 1000);
    }
  }
  poll();
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("live");
  if (live && window.uPlot) liveMetrics(live);
});
