"""The documentation's code runs: every ```python block of README.md and of each docs/*.md page.

Each page's blocks run in order, concatenated in one namespace (``__name__ == "__main__"``), in
a fresh interpreter of their own (one subprocess per page) whose working directory is a new
temporary directory holding two small capture files, ``in.pcap`` and ``in.pcapng``, for the
examples that read one.  A failing block is reported with its page, its number (1 = the page's
first python block) and its line.

Blocks that are not meant to run (pseudo-code, shell) are not fenced as ```python.  An HTML
comment on the line before a fence (blank lines between are allowed) changes how it is used:

``<!-- doc-test: netns -->``
    the block needs real interfaces: the page's interpreter runs inside a network namespace this
    test creates (``ip netns add``) with a veth pair ``veth0`` <-> ``veth1``, both up, with four
    queues each, and deletes afterwards.  Needs root; skipped without it (failed under CI).
``<!-- doc-test: file NAME -->``
    the block is a module a later block imports (a worker for a second process): it is written
    to ``NAME`` in the working directory instead of being executed.

With a warm Numba cache the whole test takes well under a minute.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
MARK = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")


def python_blocks(path: Path) -> list[dict]:
    """The page's ```python blocks: ``{"n", "line", "code", "marks"}`` in page order."""
    out, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3)
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                      and lines[j].strip().strip(fence[0]) == ""):
            j += 1
        if info == "python":
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            mark = MARK.match(lines[k].strip()) if k >= 0 else None
            body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1:j]]
            out.append({"n": len(out) + 1, "line": i + 1, "code": "\n".join(body) + "\n",
                        "marks": mark.group(1).split() if mark else []})
        i = j + 1
    return out


# The interpreter a page runs in: blocks in order, one namespace, the first failure reported.
RUNNER = r"""
import json, sys, traceback
page, blocks = json.load(open(sys.argv[1]))
sys.path.insert(0, ".")
g = {"__name__": "__main__", "__builtins__": __builtins__}
for b in blocks:
    if b["marks"][:1] == ["file"]:
        with open(b["marks"][1], "w") as f:
            f.write(b["code"])
        continue
    try:
        exec(compile(b["code"], f"{page} block {b['n']} (line {b['line']})", "exec"), g)
    except BaseException:
        traceback.print_exc()
        print(f"DOC-TEST FAILED: {page} block {b['n']} (line {b['line']})", file=sys.stderr)
        sys.exit(1)
    print(f"ok {page} block {b['n']}", flush=True)
"""


def _captures(where: Path) -> None:
    """in.pcap (classic, microseconds) and in.pcapng: 40 64-byte UDP frames each."""
    import pktbuf
    frame = (b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00"
             + bytes.fromhex("4500003200010000401100000a0000010a000002")
             + bytes.fromhex("04d2162e001e0000") + bytes(22))
    for name, ng in (("in.pcap", False), ("in.pcapng", True)):
        with pktbuf.PcapWriter(str(where / name), pcapng=ng) as w:
            for i in range(40):
                w.writepkt(frame, 1.0 + i * 1e-3)


PAGES_WITH_CODE = [p for p in PAGES if python_blocks(p)]


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_code_runs(page: Path, tmp_path: Path) -> None:
    blocks = python_blocks(page)
    rel = str(page.relative_to(ROOT))
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([rel, blocks]))
    work = tmp_path / "work"
    work.mkdir()
    _captures(work)
    argv = [sys.executable, "-c", RUNNER, str(spec)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    ns = None
    if any("netns" in b["marks"] for b in blocks):
        from .netns import Netns, need_root
        need_root(f"{rel} examples (veth pair in a namespace)")
        ns = Netns().__enter__()
        ns.veth("veth0", "veth1", queues=4)
        argv = ns.exec_argv(argv)
    try:
        r = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    finally:
        if ns is not None:
            ns.close()
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).splitlines()[-40:])
        failed = [ln for ln in r.stderr.splitlines() if ln.startswith("DOC-TEST FAILED")]
        pytest.fail(f"{failed[0] if failed else rel + ': interpreter exited ' + str(r.returncode)}"
                    f"\n{tail}", pytrace=False)


def test_blocks_are_found() -> None:
    """The extractor sees the README's examples (a broken fence would hide them)."""
    assert len(python_blocks(ROOT / "README.md")) >= 2
