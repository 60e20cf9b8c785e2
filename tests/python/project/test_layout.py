"""The package's imports go one way: the import rule of docs/architecture.md (which folder may
import which) and no circle among modules, at any depth (lazily inside a function too), checked by
scripts/check_layers.py from the source, so a circle fails here before it bites at import time."""

import importlib.util
import sys
from conftest import ROOT  # noqa: E402


def _checker():
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "scripts" / "check_layers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_layers"] = module
    spec.loader.exec_module(module)
    return module


def test_the_package_keeps_its_import_rule_and_has_no_circles():
    count, bad = _checker().check_python()
    assert count > 30 and bad == []


def _package(tmp_path, files):
    package = tmp_path / "steptrace"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_an_upward_import_a_lazy_circle_and_an_unnamed_folder_are_each_refused(tmp_path):
    package = _package(
        tmp_path,
        {
            "__init__.py": "from ._high import face\n",
            "_low/__init__.py": "",
            "_low/base.py": "def f():\n    from .._high import face  # lazy, and upward\n",
            "_high/__init__.py": "",
            "_high/face.py": "from .._low import base\n",
            "_high/other.py": "from . import face\n",
            "_stray/__init__.py": "",
        },
    )
    _, bad = _checker().check_python(package, {"_low": [], "_high": ["_low"]})
    text = "\n".join(bad)
    assert "_low/base.py:2: imports steptrace._high.face, which _low may not" in text
    assert "import circle: steptrace._high.face -> steptrace._low.base -> steptrace._high.face" in text
    assert "steptrace/_stray: a folder the import rule does not name" in text
    assert not any("other.py" in b for b in bad)  # a folder's modules import each other freely


def test_the_public_names_and_modules_users_import_stay_where_they_were():
    import steptrace

    for name in ("steptrace.torch", "steptrace.lightning", "steptrace.transformers"):  # found, not imported:
        assert importlib.util.find_spec(name) is not None, name  # importing one imports its framework

    for name in steptrace.__all__:
        assert getattr(steptrace, name) is not None
    assert callable(steptrace.capture) and callable(steptrace.summary) and callable(steptrace.window)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{steptrace.__version__}"' in pyproject
