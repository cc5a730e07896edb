#!/usr/bin/env python3
"""Vendor the viewer's JavaScript libraries from the npm registry (``make vendor-js``).

``bundle-mcp view`` writes one self-contained HTML page, so the libraries it inlines must ship
inside the wheel: ``pip install .`` needs no npm and the page never fetches anything. This script
is the one way those files change. For each pinned package it asks ``npm pack`` for the published
tarball (no install, no lifecycle scripts), checks npm's sha512 integrity of the tarball, copies
the distribution file and the licence texts into ``src/bundle_mcp/viewer/vendor/`` and records
name, version, licence, tarball integrity and the sha256 of every copied file in
``vendor/MANIFEST.json``. ``tests/test_viewer.py`` checks the files against that manifest.

To upgrade a library, change its pin below, run ``make vendor-js`` and commit the result.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENDOR = REPO / "src" / "bundle_mcp" / "viewer" / "vendor"

# name -> (version, file in the tarball that the page inlines, licence files in the tarball).
# DOMPurify is dual licensed (Apache-2.0 OR MPL-2.0): both texts ship, the page names both.
PINS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "cytoscape": ("3.35.0", "dist/cytoscape.min.js", ("LICENSE",)),
    "dompurify": ("3.5.0", "dist/purify.min.js", ("LICENSE", "LICENSE-MPL")),
}
# What each package is for, as the page's licence section says it.
PURPOSE = {
    "cytoscape": "graph rendering, pan, zoom and layout",
    "dompurify": "client-side sanitising of the rendered Markdown",
}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pack(name: str, version: str, into: Path) -> tuple[Path, dict[str, object]]:
    done = subprocess.run(
        ["npm", "pack", f"{name}@{version}", "--json", "--ignore-scripts",
         "--pack-destination", str(into)],
        capture_output=True, text=True, check=False, cwd=into,
    )
    if done.returncode != 0:
        raise SystemExit(f"npm pack {name}@{version} failed:\n{done.stderr[-2000:]}")
    (info,) = json.loads(done.stdout)
    tarball = into / info["filename"]
    algorithm, _, expected = str(info["integrity"]).partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, tarball.read_bytes()).digest()).decode()
    if actual != expected:
        raise SystemExit(f"{tarball.name}: integrity mismatch ({info['integrity']})")
    return tarball, info


def _member(tar: tarfile.TarFile, path: str) -> bytes:
    handle = tar.extractfile(f"package/{path}")
    if handle is None:
        raise SystemExit(f"{path} is not a regular file in the tarball")
    return handle.read()


def main() -> int:
    if shutil.which("npm") is None:
        print("vendor_viewer_js: npm is not installed", file=sys.stderr)
        return 1
    VENDOR.mkdir(parents=True, exist_ok=True)
    entries = []
    with tempfile.TemporaryDirectory(prefix="vendor-js-") as tmp:
        for name, (version, dist, licences) in sorted(PINS.items()):
            tarball, info = _pack(name, version, Path(tmp))
            with tarfile.open(tarball) as tar:
                package = json.loads(_member(tar, "package.json"))
                if package.get("version") != version:
                    raise SystemExit(f"{name}: npm gave {package.get('version')}, not {version}")
                files = []
                for source, role in [(dist, "script"), *((lic, "licence") for lic in licences)]:
                    data = _member(tar, source)
                    # Licence files of different packages share a name: prefix the package.
                    target = (Path(source).name if role == "script"
                              else f"{name}.{Path(source).name}.txt")
                    (VENDOR / target).write_bytes(data)
                    files.append({"file": target, "from": source, "role": role,
                                  "sha256": _sha256(data), "bytes": len(data)})
            entries.append({
                "name": name,
                "version": version,
                "licence": package.get("license"),
                "homepage": package.get("homepage"),
                "purpose": PURPOSE[name],
                "tarball": info.get("filename"),
                "integrity": info.get("integrity"),
                "files": files,
            })
            print(f"vendored {name}@{version} ({package.get('license')})")
    manifest = {
        "about": "written by scripts/vendor_viewer_js.py (make vendor-js); do not edit by hand",
        "packages": entries,
    }
    (VENDOR / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
