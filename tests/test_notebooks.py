"""Every notebook runs top to bottom, headless, and draws its figures.

The notebooks run in a kernel of this interpreter (the venv's python, through a
kernelspec written to a temporary directory) on a small demo lake in a temporary
directory (``AUDIT_LAKE``): the first notebook builds it, the next ones only read it.
The repository's ``lake/`` is never touched. Each kernel starts its own Spark JVM.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "routing-venv"
DEMO_MESSAGES = 2000
FIGURES = {"dead_letter_audit": 4, "what_if": 2}
"""Figures each notebook draws at least on the demo lake (one per plotting cell that has data)."""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> KernelSpecManager:
    """Kernelspecs holding only one that runs this very interpreter, wherever pytest started."""
    root = tmp_path_factory.mktemp("kernels")
    (root / KERNEL).mkdir()
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "routing (venv)",
        "language": "python",
        "env": {"PYTHONPATH": str(ROOT)},  # this checkout's packages, whatever is installed
    }
    (root / KERNEL / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return KernelSpecManager(kernel_dirs=[str(root)])


@pytest.fixture(scope="module")
def demo_lake(tmp_path_factory) -> Path:
    """Where the notebooks find the demo lake (built by the first one that runs)."""
    return tmp_path_factory.mktemp("notebooks") / "lake"


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def outputs(notebook: nbformat.NotebookNode, kind: str) -> list[dict]:
    return [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if kind(o)]


def test_there_are_notebooks():
    assert {p.stem for p in NOTEBOOKS} == set(FIGURES)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, kernels, demo_lake, monkeypatch):
    monkeypatch.setenv("AUDIT_LAKE", str(demo_lake))
    monkeypatch.setenv("DEMO_MESSAGES", str(DEMO_MESSAGES))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)  # the kernel starts its own JVM
    notebook = nbformat.read(path, as_version=4)
    assert notebook.cells[0].cell_type == "markdown"
    for cell in notebook.cells:  # from a clean state: the committed outputs are not reused
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    before = files(demo_lake) if demo_lake.exists() else None
    repo_lake = (ROOT / "lake").exists()

    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name=KERNEL,
        km=KernelManager(kernel_name=KERNEL, kernel_spec_manager=kernels),
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()  # raises CellExecutionError with the cell and its traceback
    finally:
        # the client leaves a kernel it did not start running: it and its JVM would live
        # as long as this test process
        client.km.shutdown_kernel(now=True)

    assert outputs(notebook, lambda o: o.output_type == "error") == []
    figures = outputs(notebook, lambda o: "image/png" in o.get("data", {}))
    assert len(figures) >= FIGURES[path.stem]
    if before is not None:  # an audit reads the lake it audits, it never writes to it
        assert files(demo_lake) == before
    assert (ROOT / "lake").exists() == repo_lake  # the repository's demo lake is not touched
