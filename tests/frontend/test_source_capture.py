"""A kernel compiles to the function the user imported: its source is captured
when `@tilecore.kernel` / `@tilecore.function` decorate it, so editing the file
afterwards changes nothing until the module is reloaded (issue 13). Helpers
without a decorator use the text captured in their file, else the file at
their first use, which must still compile to the imported function."""
import importlib
import sys

import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import import_module, run, write_module

KERNEL = """
import tilecore as ct

def scale(t):
    return t * 2

@ct.kernel
def k(a):
    t = ct.load(a, index=(0,), shape=(4,))
    ct.store(a, index=(0,), tile=scale(t) + 1)
"""


@pytest.fixture
def load(tmp_path, monkeypatch):
    """Import files from `tmp_path` under unique module names; forget them after."""
    monkeypatch.syspath_prepend(str(tmp_path))   # for importlib.reload
    names = []

    def loader(filename: str, text: str):
        name = f"tc_capture_{tmp_path.name}_{filename}"
        names.append(name)
        return import_module(write_module(tmp_path / f"{name}.py", text), name)

    yield loader
    for name in names:
        sys.modules.pop(name, None)


def _edit(module, old: str, new: str) -> None:
    path = module.__file__
    with open(path) as f:
        text = f.read()
    assert old in text
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def test_editing_the_kernel_file_after_import_changes_nothing(load):
    mod = load("kernel", KERNEL)
    _edit(mod, "scale(t) + 1)", "scale(t) + 1000)")   # the kernel
    _edit(mod, "t * 2", "t * 200")                     # an undecorated helper in its file
    a = np.arange(4, dtype=np.float32)
    run(mod.k, [a])
    np.testing.assert_array_equal(a, np.arange(4) * 2 + 1)


def test_kernels_made_after_the_edit_by_a_factory_keep_the_imported_source(load):
    """A kernel decorated at run time (by a factory) after the file was edited
    compiles its code as imported: its module's lines were read at the import."""
    mod = load("factory", KERNEL + """

def make(delta):
    @ct.kernel
    def made(a):
        t = ct.load(a, index=(0,), shape=(4,))
        ct.store(a, index=(0,), tile=t + delta)
    return made
""")
    _edit(mod, "t + delta)", "t + 100 * delta)")
    a = np.arange(4, dtype=np.float32)
    run(mod.make(5), [a])
    np.testing.assert_array_equal(a, np.arange(4) + 5)


def test_reloading_the_edited_module_compiles_the_new_code(load):
    mod = load("reload", KERNEL)
    _edit(mod, "scale(t) + 1)", "scale(t) + 1000)")
    importlib.reload(mod)
    a = np.arange(4, dtype=np.float32)
    run(mod.k, [a])
    np.testing.assert_array_equal(a, np.arange(4) * 2 + 1000)


def test_errors_show_the_source_that_was_compiled(load):
    mod = load("error", """
        import tilecore as ct

        @ct.kernel
        def k(a):
            t = ct.load(a, index=(0,), shape=(3,))   # not a power of two
            ct.store(a, index=(0,), tile=t)
        """)
    _edit(mod, "import tilecore as ct\n", "import tilecore as ct\n# a new line\n# another\n")
    with pytest.raises(ct.TileValueError) as info:
        run(mod.k, [np.zeros(4, np.float32)])
    err = info.value
    assert err.message == ('Invalid argument "shape" of load(): tile dimensions must be powers '
                           'of two, got (3,)')
    assert (err.loc.line, err.loc.col) == (6, 8)
    frame = str(err).splitlines()
    assert frame[-3] == f'  File "{mod.__file__}", line 6, col 9, in k:'
    assert frame[-2] == "    t = ct.load(a, index=(0,), shape=(3,))   # not a power of two"


HELPER = '''
def plus(t):
    return t + 1
'''
USER = """
import tilecore as ct
from {helpers} import plus

@ct.kernel
def k(a):
    t = ct.load(a, index=(0,), shape=(4,))
    ct.store(a, index=(0,), tile=plus(t))
"""


def test_decorated_helper_in_another_module_keeps_its_imported_source(load):
    helpers = load("tile_helpers", "import tilecore as ct\n\n@ct.function" + HELPER)
    user = load("tile_user", USER.format(helpers=helpers.__name__))
    _edit(helpers, "t + 1", "t + 1000")
    a = np.zeros(4, np.float32)
    run(user.k, [a])
    np.testing.assert_array_equal(a, 1)


def test_undecorated_helper_edited_before_its_first_use_is_an_error(load):
    helpers = load("plain_helpers", HELPER)
    user = load("plain_user", USER.format(helpers=helpers.__name__))
    _edit(helpers, "t + 1", "t + 1000")
    with pytest.raises(ct.TileSyntaxError) as info:
        run(user.k, [np.zeros(4, np.float32)])
    assert info.value.message == (
        f"The source of plus() in {helpers.__file__} has changed since the function was "
        f"imported; reload its module (importlib.reload) or restart Python to compile the "
        f"edited code (decorating it with @tilecore.function captures its source at import)")
    assert (info.value.loc.filename, info.value.loc.line) == (helpers.__file__, 2)
    importlib.reload(helpers)
    importlib.reload(user)
    a = np.zeros(4, np.float32)
    run(user.k, [a])
    np.testing.assert_array_equal(a, 1000)


def test_unedited_helpers_of_every_shape_compile(load):
    """The check that a helper's file still holds the imported function has no
    false alarms: closures, methods, multi-line strings, future imports."""
    helpers = load("shapes_helpers", '''
        from __future__ import annotations


        def make_adder(k):
            def add_k(t) -> object:
                """Adds k.

                A multi-line docstring, indented with the function."""
                return t + k
            return add_k


        add3 = make_adder(3)


        class Ops:
            @staticmethod
            def twice(t):
                return t * 2


        def outer_constant():
            if True:
                def nested(t):
                    return t - 0.5
            return nested


        nested = outer_constant()
        ''')
    user = load("shapes_user", f"""
        import tilecore as ct
        from {helpers.__name__} import add3, Ops, nested

        @ct.kernel
        def k(a):
            t = ct.load(a, index=(0,), shape=(4,))
            ct.store(a, index=(0,), tile=nested(Ops.twice(add3(t))))
        """)
    a = np.arange(4, dtype=np.float32)
    run(user.k, [a])
    np.testing.assert_array_equal(a, (np.arange(4) + 3) * 2 - 0.5)


def test_the_bytecode_check_recognises_unedited_functions(load):
    """The check itself (not only its absence of alarms) on functions whose
    bytecode depends on their surroundings: a closure, a class (name mangling,
    `__class__`), decorators, the module's imports."""
    from tilecore.frontend import source
    m = load("check_shapes", '''
        import math


        def make(k):
            def add_k(t):
                s = """a multi-line
        string"""
                return t + k
            return add_k


        class Ops:
            class Inner:
                def deep(self, t, __p=1):
                    return t + self.__q + super().__hash__()


        def deco(f):
            return f


        @deco
        @deco
        def decorated(t, *args, k=1, **kw):
            return [math.floor(i) for i in range(3)]
        ''')
    lines = source._current_lines(m.deco, m.__file__)
    edited = [line.replace("t + ", "t - ").replace("range(3)", "range(4)") for line in lines]
    for f in (m.make(1), m.Ops.Inner.deep, m.decorated):
        assert source._compiles_to(f, lines) is True, f.__qualname__
        assert source._compiles_to(f, edited) is False, f.__qualname__
