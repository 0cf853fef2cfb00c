"""Rules of the package layout that import-linter cannot see.

* Importing ``pktbuf.x.kernels`` runs ``pktbuf/x/__init__.py`` first, an edge the import graph
  does not show: so no package ``__init__`` but the top level may hold code -- a docstring,
  nothing else.
* Private names (``_x``) stay inside their package: a name another package needs is public.
* No source file refers to material outside the repository.
* Nothing waits with ``select()``: it refuses descriptors >= ``FD_SETSIZE`` (1024), which a
  busy process reaches; ``pktbuf.fdwait.readable`` (poll) is the replacement.
"""
import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "pktbuf")


def _modules():
    for d, dirs, files in os.walk(PKG):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                yield rel.removesuffix(".__init__"), path, f == "__init__.py"


def _package_of(mod, is_init):
    parts = mod.split(".")
    return ".".join(parts if is_init else parts[:-1])


def test_package_inits_hold_no_code():
    offenders = []
    for mod, path, is_init in _modules():
        if not is_init or mod == "pktbuf":          # the top level: lazy names only
            continue
        tree = ast.parse(open(path).read())
        body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) else tree.body
        body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
        if body:
            offenders.append(f"{mod}: {[type(n).__name__ for n in body]}")
    assert not offenders, offenders


def _resolve(node, here):
    if node.level == 0:
        return node.module or ""
    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _inside(pkg, here):
    """``pkg`` is ``here`` or one of its ancestors: its private names are visible here."""
    return here == pkg or here.startswith(pkg + ".")


def test_private_names_stay_in_their_package():
    offenders = []
    for mod, path, is_init in _modules():
        here = _package_of(mod, is_init)
        for node in ast.walk(ast.parse(open(path).read())):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _resolve(node, here)
            if not target.startswith("pktbuf"):
                continue
            parts = target.split(".")
            # a private module of a package: visible in that package (and below) only
            for k in range(1, len(parts)):
                if parts[k].startswith("_") and not _inside(".".join(parts[:k]), here):
                    offenders.append(f"{mod} imports module {target}")
            # a private name: visible in the package of the module that defines it
            owner_pkg = target if os.path.isdir(os.path.join(ROOT, *parts)) else ".".join(parts[:-1])
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__") \
                        and not _inside(owner_pkg, here):
                    offenders.append(f"{mod} imports {target}.{a.name}")
    assert not offenders, sorted(set(offenders))


def test_nothing_refers_outside_the_repository():
    pat = re.compile(r"\.\./shared|shared/(specs|tools)|/work/shared")
    hits = []
    for d in ("pktbuf", "tests", "docs", "examples", "asv_bench"):
        for base, dirs, files in os.walk(os.path.join(ROOT, d)):
            dirs[:] = [x for x in dirs if x not in ("__pycache__", ".asv", "results", "html")]
            for f in files:
                if f.endswith((".py", ".md", ".c", ".json", ".toml", ".sh")):
                    p = os.path.join(base, f)
                    if p == os.path.abspath(__file__):
                        continue
                    if pat.search(open(p, errors="replace").read()):
                        hits.append(os.path.relpath(p, ROOT))
    for f in ("README.md", "pyproject.toml"):
        if pat.search(open(os.path.join(ROOT, f)).read()):
            hits.append(f)
    assert not hits, hits


def _select_uses(tree):
    """Lines of ``tree`` that reach ``select.select`` (through any alias of the module, or
    ``from select import select``) or ``selectors.SelectSelector``."""
    mods = {"select": set(), "selectors": set()}       # local names of the two modules
    hits = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name in mods:
                    mods[a.name].add(a.asname or a.name)
        elif isinstance(n, ast.ImportFrom) and n.module in mods and not n.level:
            bad = "select" if n.module == "select" else "SelectSelector"
            if any(a.name in (bad, "*") for a in n.names):
                hits.append(n.lineno)
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            if (n.value.id in mods["select"] and n.attr == "select") or \
                    (n.value.id in mods["selectors"] and n.attr == "SelectSelector"):
                hits.append(n.lineno)
    return sorted(hits)


# shows select()'s refusal of a high descriptor, the defect fdwait exists for
SELECT_ALLOWED = {"tests/core/test_fdwait.py"}


def test_nothing_waits_with_select():
    hits = []
    for d in ("pktbuf", "tests", "examples", "asv_bench"):
        for base, dirs, files in os.walk(os.path.join(ROOT, d)):
            dirs[:] = [x for x in dirs if x not in ("__pycache__", ".asv", "results", "html")]
            for f in files:
                if f.endswith(".py"):
                    p = os.path.join(base, f)
                    if os.path.relpath(p, ROOT) in SELECT_ALLOWED:
                        continue
                    for line in _select_uses(ast.parse(open(p).read(), p)):
                        hits.append(f"{os.path.relpath(p, ROOT)}:{line}")
    assert not hits, f"select() refuses fds >= FD_SETSIZE: use pktbuf.fdwait.readable ({hits})"


def test_the_select_check_finds_every_spelling():
    for src in ("import select\nselect.select([], [], [], 0)",
                "import select as s\nr = s.select",
                "from select import select",
                "from select import *",
                "import selectors\nselectors.SelectSelector()",
                "from selectors import SelectSelector"):
        assert _select_uses(ast.parse(src)), src
    for src in ("import select\nselect.poll()", "import selectors\nselectors.DefaultSelector()",
                "x.select([], [], [], 0)", "'select.select'"):
        assert not _select_uses(ast.parse(src)), src
