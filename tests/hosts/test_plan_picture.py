"""The plan picture in a real browser: headless Chromium loads the HTML, its DOM holds the drawing, and a
screenshot shows it (the README's picture is made the same way)."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

from hostutil import PROJECT, require_tool, toporender

EXAMPLE = PROJECT / "examples" / "multi-rack-zone"


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    exe = require_tool("chromium")
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_plan_page_renders_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    proc = toporender("plan", str(EXAMPLE), "--format", "html")
    assert proc.returncode == 0, proc.stderr
    page.write_text(proc.stdout)
    dom = _chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr
    assert dom.stdout.count('class="domain"') == 6
    assert 'data-gang="workflows/dual-model.yaml#train"' in dom.stdout
    assert 'data-gang="workflows/eval.yaml#evaluate-group"' in dom.stdout
    shot = tmp_path / "plan.png"
    done = _chromium("--window-size=1280,400", f"--screenshot={shot}", page.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert (width, height) == (1280, 400)
    assert shot.stat().st_size > 10_000, "a blank page compresses to far less"


def test_the_readme_picture_is_current(tmp_path: Path) -> None:
    """docs/plan.png is the screenshot of examples/multi-rack-zone's plan (re-made with the command in
    docs/placement.md when the picture changes); here its header and width are checked."""
    picture = PROJECT / "docs" / "plan.png"
    head = picture.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24])[0] == 1280
    assert "docs/plan.png" in (PROJECT / "README.md").read_text()
