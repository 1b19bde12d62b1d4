"""The storlet image of the container-engine runtime, built locally from host files.

No registry is needed (or reachable): the image is a root filesystem made of
the host's Debian Python interpreter (``/usr/bin/python3.X``), its standard
library (without tests, IDLE, Tk, ensurepip and the site directories),
util-linux's ``logger`` (the daemon factory pipes each storlet daemon's
output into it) and the shared libraries ``ldd`` names for these, for the
interpreter's extension modules and for the compiled modules of the Python
path the gateway binds (``packages``: zstandard, cryptography, ...; libraries
bundled inside those directories come with the bind), plus ``libgcc_s`` and
``libstdc++``. Storlets, IOStack and the filters' packages are not in it:
the gateway binds them read-only, as the bubblewrap sandbox does
(``docker_gateway``), so an upgrade of them needs no new image.

The image is tagged with a hash of its inputs (every file's path, size and
modification time, and ``LAYOUT_VERSION``): ``ensure_image`` builds it
(``podman import`` of a tarball) only when no image of that tag exists, so
the image is rebuilt when the host's Python or libraries change (a Debian
upgrade) and reused otherwise; images of earlier tags are removed.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

IMAGE_REPOSITORY = "localhost/iostack-storlet"
# Bump when the image's layout (what is copied, the directories made) changes.
LAYOUT_VERSION = "1"
PYTHON = os.path.realpath("/usr/bin/python3")
STDLIB_SKIP = frozenset({"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "site-packages",
                         "dist-packages", "__pycache__", "lib2to3", "pydoc_data"})
EXTRA_LIBS = ("libgcc_s.so.1", "libstdc++.so.6")
# The daemon factory pipes each storlet daemon's output into util-linux's logger.
PROGRAMS = ("/usr/bin/logger",)
# Mount points and the empty directories the sandbox expects (root-owned, read-only root).
DIRECTORIES = ("tmp", "proc", "sys", "dev", "etc", "mnt/channels", "var/lib/storlets",
               "usr/local/lib/storlets")
MERGED_USR = ("bin", "lib", "lib64", "sbin")
_LDD_PATH = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


class ImageError(RuntimeError):
    """The storlet image could not be built; the message says why."""


def _stdlib_files(stdlib: Path) -> list[Path]:
    files = []
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in STDLIB_SKIP)
        files += [Path(root, name) for name in sorted(names) if not name.endswith(".pyc")]
    return files


def _shared_libraries(objects: Iterable[Path]) -> set[Path]:
    """The libraries ``ldd`` resolves for ``objects`` (and the dynamic loader)."""
    found: set[Path] = set()
    objects = [str(o) for o in objects]
    for start in range(0, len(objects), 100):
        out = subprocess.run(["ldd", *objects[start:start + 100]],  # noqa: S603,S607 - fixed argv
                             capture_output=True, text=True, check=False).stdout
        found.update(Path(m.group(1)) for m in _LDD_PATH.finditer(out))
    return found


def _library_dir(libs: set[Path]) -> Path:
    """The directory of the C library among ``libs`` (where EXTRA_LIBS live too)."""
    for lib in libs:
        if lib.name.startswith("libc.so"):
            return Path(os.path.realpath(lib.parent))
    raise ImageError(f"ldd found no C library for {PYTHON}")


def _compiled_modules(packages: Iterable[str]) -> list[Path]:
    found = []
    for top in packages:
        for root, _, names in os.walk(top):
            found += [Path(root, n) for n in names if n.endswith(".so") or ".so." in n]
    return found


def image_inputs(packages: Iterable[str] = (), python: str = PYTHON) -> list[Path]:
    """Every host file the image holds (the interpreter, its library, shared libraries);
    ``packages``: the directories the gateway binds on the Python path."""
    stdlib = Path(f"/usr/lib/{Path(python).name}")
    if not os.path.isfile(python) or not stdlib.is_dir():
        raise ImageError(f"{python} and {stdlib} are needed for the storlet image (Debian's "
                         "python3 package)")
    files = _stdlib_files(stdlib)
    extensions = [f for f in files if f.suffix == ".so"]
    programs = [Path(p) for p in PROGRAMS if os.path.isfile(p)]
    packages = [os.path.realpath(p) for p in packages]
    libs = _shared_libraries([Path(python), *programs, *extensions])
    libs |= {lib for lib in _shared_libraries(_compiled_modules(packages))
             if not any(os.path.realpath(lib).startswith(p + "/") for p in packages)}
    libdir = _library_dir(libs)
    libs |= {libdir / name for name in EXTRA_LIBS if (libdir / name).exists()}
    # One file per place in the image (/lib/x/libc.so.6 is /usr/lib/x/libc.so.6 there).
    return sorted({_inside(p): p for p in sorted({Path(python), *programs, *files, *libs})}
                  .values())


def image_tag(inputs: list[Path]) -> str:
    digest = hashlib.sha256(LAYOUT_VERSION.encode())
    for path in inputs:
        st = path.stat()
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _add_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def _add_symlink(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    tar.addfile(info)


def _inside(path: Path) -> str:
    """Where a host file goes in the image: under usr/ (merged /usr, as Debian 12)."""
    real = os.path.realpath(path.parent) + "/" + path.name
    relative = real.lstrip("/")
    return relative if relative.startswith("usr/") else f"usr/{relative}"


def write_rootfs(inputs: list[Path], out: Path, python: str = PYTHON) -> None:
    """The image's root filesystem as a tarball (owned by root, no setuid bits)."""
    with tarfile.open(out, "w") as tar:
        made: set[str] = set()
        for directory in ("usr", "usr/bin", "usr/lib", "usr/lib64", "usr/sbin", *DIRECTORIES):
            _add_dir(tar, directory, 0o1777 if directory == "tmp" else 0o755)
            made.add(directory)
        for link in MERGED_USR:
            _add_symlink(tar, link, f"usr/{link}")
        for path in inputs:
            name = _inside(path)
            for parent in reversed(Path(name).parents[:-1]):
                if str(parent) not in made:
                    _add_dir(tar, str(parent))
                    made.add(str(parent))
            info = tar.gettarinfo(os.path.realpath(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode &= 0o755
            with open(os.path.realpath(path), "rb") as f:
                tar.addfile(info, f)
        _add_symlink(tar, "usr/bin/python3", Path(python).name)
        passwd = b"root:x:0:0:root:/root:/usr/sbin/nologin\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size, info.mode = len(passwd), 0o644
        tar.addfile(info, io.BytesIO(passwd))


def _podman(podman: str, env: Mapping[str, str], *args: str,
            check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([podman, *args], capture_output=True, text=True,  # noqa: S603
                          env={**os.environ, **env}, timeout=600, check=False)
    if check and done.returncode != 0:
        raise ImageError(f"podman {' '.join(args[:2])} failed: {done.stderr.strip()[-500:]}")
    return done


def ensure_image(podman: str, env: Mapping[str, str], work_dir: Path,
                 packages: Iterable[str] = ()) -> str:
    """The storlet image's name, building it first when its inputs changed (``packages``:
    the Python path the gateway binds, whose compiled modules' libraries it needs)."""
    inputs = image_inputs(packages)
    name = f"{IMAGE_REPOSITORY}:{image_tag(inputs)}"
    if _podman(podman, env, "image", "exists", name, check=False).returncode != 0:
        work_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
            rootfs = Path(tmp) / "rootfs.tar"
            write_rootfs(inputs, rootfs)
            _podman(podman, env, "import", "--change", 'CMD ["/usr/bin/python3"]',
                    str(rootfs), name)
    listed = _podman(podman, env, "images", "--format", "{{.Repository}}:{{.Tag}}",
                     IMAGE_REPOSITORY).stdout.split()
    for old in listed:
        if old != name:
            _podman(podman, env, "rmi", "--force", old, check=False)
    return name
