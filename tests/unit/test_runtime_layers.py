"""The node runtime (files/multinode-runtime/multinode_runtime) is layers
that import downwards only: no module imports, even inside a function, a
module that imports it back (directly or through others). A cycle is what
made the runtime hard to read one file at a time; this test names any that
comes back."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = "multinode_runtime"
PACKAGE_DIR = os.path.join(ROOT, "files", "multinode-runtime", PACKAGE)


def imported_modules(tree, modules):
    """{module of the package: line of its first import} of every import in
    `tree`, at the top or inside a function or class."""
    found = {}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 or (node.level == 0 and node.module and node.module.split(".")[0] == PACKAGE):
                module = node.module or ""
                if node.level == 0:
                    module = module[len(PACKAGE) + 1:]
                # `from . import a, b` imports modules; `from .a import x` module a
                names = [module.split(".")[0]] if module else [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name.split(".")[1] for alias in node.names
                     if alias.name.startswith(PACKAGE + ".")]
        for name in names:
            if name in modules:
                found.setdefault(name, node.lineno)
    return found


def import_graph(package_dir):
    """{module: {module it imports: line}} of the package's modules."""
    modules = {name[:-3] for name in os.listdir(package_dir) if name.endswith(".py")}
    graph = {}
    for module in sorted(modules):
        with open(os.path.join(package_dir, module + ".py"), encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), module + ".py")
        graph[module] = {name: line for name, line in imported_modules(tree, modules).items()
                         if name != module}
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan),
    each as the modules of one cycle through it, in import order."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(one_cycle(graph, component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def one_cycle(graph, component):
    """A path through `component` from its first module back to it, with
    the line of each import: `a -> b (a.py:12) -> a (b.py:3)`, then the
    component's other modules."""
    start = min(component)
    paths = [[start]]
    seen = {start}
    while paths:  # breadth first: the shortest cycle back to start
        path = paths.pop(0)
        for imported in sorted(graph[path[-1]]):
            if imported == start:
                path = path + [start]
                steps = ["%s (%s.py:%d)" % (module, before, graph[before][module])
                         for before, module in zip(path[:-1], path[1:], strict=True)]
                cycle = " -> ".join(path[:1] + steps)
                others = sorted(component - set(path))
                return cycle + ("; in the same circle: %s" % ", ".join(others) if others else "")
            if imported in component and imported not in seen:
                seen.add(imported)
                paths.append(path + [imported])
    raise AssertionError("no cycle through %s" % sorted(component))


def test_the_runtime_imports_downwards_only():
    found = cycles(import_graph(PACKAGE_DIR))
    assert not found, "import cycles in the node runtime (function-level imports count):\n" + "\n".join(found)


def test_a_function_level_import_that_closes_a_cycle_is_found(tmp_path):
    # The check itself: a cycle closed only inside a function is one too.
    (tmp_path / "low.py").write_text("def later():\n    from .high import thing\n    return thing\n")
    (tmp_path / "high.py").write_text("from . import low\nthing = low\n")
    (tmp_path / "other.py").write_text("from multinode_runtime.low import later\n")
    assert cycles(import_graph(str(tmp_path))) == ["high -> low (high.py:1) -> high (low.py:2)"]
