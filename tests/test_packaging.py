"""What an install carries: every folder of the package that holds Python code is a package
setup.py's find_packages finds, so a wheel (not only an editable install, which reads the source
folder) has all of it."""

import os

from setuptools import find_packages

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_folder_of_code_is_a_package_the_install_carries():
    found = set(find_packages(where=ROOT, include=["tree_fairseq", "tree_fairseq.*"]))
    with_code = set()
    for folder, dirs, files in os.walk(os.path.join(ROOT, "tree_fairseq")):
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        if any(name.endswith(".py") for name in files):
            with_code.add(os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert "tree_fairseq.modules" in with_code
    assert with_code - found == set(), "folders of code without an __init__.py, left out of a wheel"
