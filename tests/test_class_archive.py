"""The class archive the embedded session maps (jobs/class_archive.py, routing/io/session.py):
recorded by ``make setup``, mapped by every embedded JVM, ignored quietly once stale."""

import subprocess
from pathlib import Path

from routing.io.session import CLASS_ARCHIVE, class_archive_options


def _mapped_files(pid: int) -> set[str]:
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[5] for line in lines if len(line.split(maxsplit=5)) == 6}


def test_the_embedded_jvm_maps_the_archive_make_setup_recorded(spark):
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    assert CLASS_ARCHIVE.is_file(), "make setup records it"
    assert str(CLASS_ARCHIVE) in _mapped_files(jvm_pid)


def _hello_jar(folder: Path) -> Path:
    folder.mkdir()
    (folder / "Hello.java").write_text(
        'public class Hello { public static void main(String[] a) { System.out.print("hi"); } }'
    )
    subprocess.run(["javac", "-d", str(folder), str(folder / "Hello.java")], check=True)
    subprocess.run(
        ["jar", "cf", str(folder / "hello.jar"), "-C", str(folder), "Hello.class"], check=True
    )
    return folder / "hello.jar"


def test_a_jvm_ignores_a_stale_archive_without_a_word(tmp_path, monkeypatch):
    archive = tmp_path / "classes.jsa"
    recorded_with = _hello_jar(tmp_path / "old")
    recording = class_archive_options(record_to=archive).split()
    subprocess.run(["java", *recording, "-cp", str(recorded_with), "Hello"], check=True)
    monkeypatch.setattr("routing.io.session.CLASS_ARCHIVE", archive)
    mapping = class_archive_options().split()
    assert f"-XX:SharedArchiveFile={archive}" in mapping
    # the jar it was recorded with replaced: Java cannot use the archive, and says so
    # on stdout unless told not to, which would end up in the job's output
    replaced = _hello_jar(tmp_path / "new")
    run = subprocess.run(
        ["java", *mapping, "-cp", str(replaced), "Hello"], capture_output=True, text=True
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "hi", "")


def test_recording_replaces_mapping(tmp_path):
    options = class_archive_options(record_to=tmp_path / "new.jsa")
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in options
    assert "SharedArchiveFile" not in options
