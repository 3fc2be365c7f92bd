"""A report folder is always one whole run, one writer at a time, its cache authentic, and every fault its own exit
code and sentence (``verify._common.files``, ``convergence._runtime.faults``, ``convergence._cli``)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from convergence._cli import main
from tests.test_execution import ROOT, _tiny_strong_fedorov
from verify._common import JOURNAL, atomic_write_set, deferred_signals, exclusive_folder, recover_folder

OLD = {"a.json": b"old json", "a.md": b"old md", "index.md": b"old index", "other.md": b"another study"}
NEW = {"a.json": b"new json", "a.md": b"new md", "a.png": b"new png", "index.md": b"new index"}


def _visible(folder: Path) -> dict[str, bytes]:
    """The folder's files as a reader sees them (hidden ones: the lock, the cache, a journal, temporaries aside)."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}


def _steps(tmp_path: Path) -> list[str]:
    """Every step of the write sequence of NEW over OLD, as ``atomic_write_set`` announces them to its hook."""
    seen: list[str] = []
    folder = tmp_path / "probe"
    atomic_write_set({folder / name: data for name, data in NEW.items()}, fault=seen.append)
    return seen


@pytest.fixture(autouse=True)
def _sigint_raises_keyboard_interrupt():
    """A job started in the background by a non-interactive shell (``cmd &``, nohup) inherits SIGINT ignored, and
    Python then leaves it ignored: these tests send SIGINT, to this process and to children, and need Python's own
    handler, as under a terminal (children started meanwhile get the default disposition)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _old_folder(folder: Path) -> None:
    atomic_write_set({folder / name: data for name, data in OLD.items()})


def _assert_one_whole_set(folder: Path) -> str:
    """The folder holds exactly the previous set or exactly the new one over it, byte for byte, and nothing else."""
    found = _visible(folder)
    if found == OLD:
        return "old"
    assert found == {**OLD, **NEW}, sorted(found)
    return "new"


def test_the_write_sequence_has_a_step_per_file_a_commit_and_a_rename_per_file(tmp_path):
    steps = _steps(tmp_path)
    assert steps == [
        *(f"write {n}" for n in NEW),
        "commit",
        *(f"rename {n}" for n in NEW),
        "done",
    ]


class Interrupt(KeyboardInterrupt):
    pass


def test_an_interruption_at_any_step_leaves_one_whole_set_and_no_temporary(tmp_path):
    """Interrupted (an exception, as Ctrl-C outside the deferred section) before each step: before the commit point
    the previous set stays, from it on the new one is completed, and no temporary or journal is left."""
    outcomes = []
    for index, step in enumerate(_steps(tmp_path)):
        folder = tmp_path / f"at-{index}"
        _old_folder(folder)

        def fault(name, step=step):
            if name == step:
                raise Interrupt(step)

        with pytest.raises(Interrupt):
            atomic_write_set({folder / name: data for name, data in NEW.items()}, fault=fault)
        outcomes.append(_assert_one_whole_set(folder))
        assert not [p.name for p in folder.iterdir() if p.name.startswith(".")], step  # no temporary, no journal
    assert outcomes == ["old"] * (len(NEW) + 1) + ["new"] * (len(NEW) + 1)


KILLED_WRITE = """
import os, sys
from pathlib import Path
from verify._common import atomic_write_set
folder, step = Path(sys.argv[1]), sys.argv[2]
new = {name: data.encode() for name, data in %r.items()}
atomic_write_set({folder / n: d for n, d in new.items()}, fault=lambda name: os._exit(9) if name == step else None)
"""


def test_a_process_killed_at_any_step_leaves_a_folder_the_next_start_makes_whole(tmp_path):
    """SIGKILL's equivalent (``os._exit`` at the step: no ``finally`` runs) before each step, in a child process;
    ``recover_folder`` (what the next run does first, under the folder's lock) leaves one whole set, byte for byte,
    and no temporary: the previous set when killed before the commit point, the new one from it on."""
    script = KILLED_WRITE % {name: data.decode() for name, data in NEW.items()}
    outcomes = []
    for index, step in enumerate(_steps(tmp_path)):
        folder = tmp_path / f"killed-{index}"
        _old_folder(folder)
        child = subprocess.run([sys.executable, "-c", script, str(folder), step], cwd=ROOT, check=False)
        assert child.returncode == 9, step
        journals = list(folder.glob(f"{JOURNAL}.*.journal"))
        assert len(journals) == (index > len(NEW))  # past the commit point the journal says how to end
        recover_folder(folder)
        outcomes.append(_assert_one_whole_set(folder))
        assert not [p.name for p in folder.iterdir() if p.name.startswith(".")], step
    assert outcomes == ["old"] * (len(NEW) + 1) + ["new"] * (len(NEW) + 1)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_from_another_thread_during_the_renames_waits_for_the_whole_set(tmp_path, number):
    """The signal reaches the process while the renames run (sent from another thread, as BLAS or dask threads
    receive Ctrl-C): the set is completed first, then the signal acts (KeyboardInterrupt / the SIGTERM handler)."""
    folder = tmp_path / "set"
    _old_folder(folder)

    seen = []

    def fault(name):
        seen.append(name)
        if name == "rename a.json":
            sender = threading.Thread(target=os.kill, args=(os.getpid(), number))
            sender.start()
            sender.join()
            time.sleep(0.05)  # the main thread would run the handler here, were it not held back

    class Terminated(Exception):
        pass

    def on_term(n, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        with pytest.raises(KeyboardInterrupt if number == signal.SIGINT else Terminated):
            atomic_write_set({folder / name: data for name, data in NEW.items()}, fault=fault)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen[-1] == "done", seen  # the signal acted only once the set was whole
    assert _assert_one_whole_set(folder) == "new"


def test_deferred_signals_restore_the_handlers_and_pass_nothing_on_when_nothing_came():
    before = signal.getsignal(signal.SIGINT)
    with deferred_signals():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before


def test_a_set_must_lie_in_one_folder(tmp_path):
    with pytest.raises(ValueError, match="one folder"):
        atomic_write_set({tmp_path / "a": b"", tmp_path / "b" / "c": b""})


def test_a_failed_write_leaves_the_previous_set(tmp_path, monkeypatch):
    """A write that fails midway (a full disk at the second temporary) leaves the previous set and no temporary."""
    _old_folder(tmp_path)
    real = os.fdopen
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(os, "fdopen", failing)
    with pytest.raises(OSError):
        atomic_write_set({tmp_path / name: data for name, data in NEW.items()})
    monkeypatch.undo()
    assert _assert_one_whole_set(tmp_path) == "old"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_the_next_start_removes_orphan_temporaries_but_spares_a_shared_caches_fresh_ones(tmp_path):
    orphan = tmp_path / ".a.md.x1y2z3w4.tmp"
    orphan.write_bytes(b"half")
    assert recover_folder(tmp_path, stale_after=3600.0) == []  # fresh: may be another writer's
    assert orphan.exists()
    os.utime(orphan, (time.time() - 7200, time.time() - 7200))
    assert recover_folder(tmp_path, stale_after=3600.0) == [f"removed the temporary {orphan} of an interrupted write"]
    orphan.write_bytes(b"half")
    recover_folder(tmp_path)
    assert not orphan.exists()


# --- the command line -------------------------------------------------------------------------------------------

TINY = ["run", "strong-fedorov", "--profile", "quick", "--seed", "3", "--scheduler", "sync"]
TINY_EXIT = 3  # the tiny design (512 paths) leaves a claim inconclusive: exit 3, no claim failed


@pytest.fixture
def tiny(monkeypatch):
    _tiny_strong_fedorov(monkeypatch)


def _run_reports(tmp_path: Path, capsys) -> Path:
    out = tmp_path / "out"
    assert main([*TINY, "--out", str(out)]) == TINY_EXIT
    capsys.readouterr()
    return out


def test_a_run_interrupted_anywhere_writes_nothing_and_exits_4(tiny, tmp_path, capsys, monkeypatch):
    """Ctrl-C while the study computes: exit 4, one sentence (no traceback), the folder as it was, the finished
    blocks cached; interrupted while its set is written (from the commit point on): the set is whole, and the
    sentence says the reports were written."""
    import convergence._cli as cli

    out = _run_reports(tmp_path, capsys)
    before = _visible(out)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(type(cli.STUDIES["strong-fedorov"]), "run", interrupted)
        assert main([*TINY, "--seed", "4", "--out", str(out)]) == 4
    err = capsys.readouterr().err
    assert err.startswith("error: interrupted: no report of this run was written") and "--resume" in err
    assert "Traceback" not in err and _visible(out) == before

    def at_rename(files, fault=None):
        def hook(step):
            if step == "rename index.md":
                os.kill(os.getpid(), signal.SIGINT)

        atomic_write_set(files, fault=hook)

    monkeypatch.setattr(cli, "atomic_write_set", at_rename)
    assert main([*TINY, "--seed", "5", "--out", str(out)]) == 4
    assert "interrupted after this run's reports were written" in capsys.readouterr().err
    assert json.loads((out / "strong-fedorov.json").read_text())["seed"] == 5
    assert json.loads((out / "run.json").read_text())["seed"] == 5


def test_a_second_writer_of_a_folder_is_refused_naming_the_first(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from verify._common import exclusive_folder\n"
            "with exclusive_folder(Path(sys.argv[1]), 'pid 4242, started yesterday'):\n"
            "    print('held', flush=True); time.sleep(60)",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main([*TINY, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"'{out}' is in use by another run (pid 4242, started yesterday)" in err
        assert not (out / "strong-fedorov.json").exists()
    finally:
        holder.kill()
        holder.wait()
    with exclusive_folder(out, "me"):  # released by the system when its holder died
        pass


def test_a_forged_cache_entry_changes_no_number(tiny, tmp_path, capsys):
    """The forging probe: every cached array x 3 and a checksum recomputed by someone without the cache's secret.
    The resumed run refuses every entry with a warning, recomputes it, and reports the same numbers."""
    out = _run_reports(tmp_path, capsys)
    clean = json.loads((out / "strong-fedorov.json").read_text())
    entries = sorted((out / ".cache").glob("*.npz"))
    assert entries and oct((out / ".cache" / ".key").stat().st_mode & 0o777) == "0o600"
    import hashlib
    import hmac

    for entry in entries:
        with np.load(entry) as data:
            arrays = {name: data[name] for name in data.files}
        for name in arrays:
            if name.startswith("leaf_"):
                arrays[name] = arrays[name] * 3
        arrays["__hmac__"] = np.array(hmac.new(b"guessed", b"", hashlib.sha256).hexdigest())
        np.savez(entry, **arrays)
    with pytest.warns(UserWarning, match="not authentic"):
        assert main([*TINY, "--out", str(out), "--resume"]) == TINY_EXIT
    assert "0 reused" in capsys.readouterr().out
    resumed = json.loads((out / "strong-fedorov.json").read_text())
    assert resumed["checks"] == clean["checks"]


def test_a_shared_cache_takes_a_key_file(tiny, tmp_path, capsys):
    key = tmp_path / "shared.key"
    key.write_bytes(os.urandom(32))
    cache = tmp_path / "shared-cache"
    args = [*TINY, "--cache", str(cache), "--cache-key", str(key)]
    assert main([*args, "--out", str(tmp_path / "a")]) == TINY_EXIT
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "b"), "--resume"]) == TINY_EXIT
    assert " 0 computed" in capsys.readouterr().out
    assert not (cache / ".key").exists()
    key.write_bytes(b"short")
    with pytest.raises(SystemExit):
        main([*args, "--out", str(tmp_path / "c")])
    assert "must hold at least 16 bytes, got 5" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[]", "a JSON list, not an object"),
        ('{"study": "strong-fedorov", "profile": "quick", "verdict": "pass", "checks": [], "cpu_s": "abc"}', "cpu_s"),
        ("{not json", "not JSON"),
    ],
)
def test_a_malformed_earlier_report_is_named_and_left_alone(tiny, tmp_path, capsys, content, problem):
    out = tmp_path / "out"
    out.mkdir()
    (out / "strong-fedorov.json").write_text(content)
    assert main([*TINY, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'strong-fedorov.json'} is not a report written by this tool" in err and problem in err
    assert "move it or pass --out" in err and "Traceback" not in err
    assert (out / "strong-fedorov.json").read_text() == content


@pytest.mark.parametrize(
    ("code", "error", "sentence"),
    [
        (2, OSError(errno.ENOSPC, "No space left on device", "x.npz"), "cannot write x.npz: No space left on device"),
        (2, OSError(errno.EFBIG, "File too large", "x.png"), "cannot write x.png: File too large"),
        (6, RuntimeError("boom"), "unexpected RuntimeError: boom (a bug: rerun with --debug for the traceback)"),
    ],
)
def test_each_fault_has_its_exit_code_and_one_sentence(tmp_path, capsys, monkeypatch, code, error, sentence):
    import convergence._cli as cli

    def fails(*args):
        raise error

    monkeypatch.setattr(cli, "_run_studies", fails)
    assert main([*TINY, "--out", str(tmp_path)]) == code
    err = capsys.readouterr().err
    assert sentence in err and "Traceback" not in err and err.count("\n") == 1
    assert main([*TINY, "--out", str(tmp_path), "--debug"]) == code  # the traceback, the same status
    assert "Traceback" in capsys.readouterr().err


def test_a_lost_scheduler_exits_5_naming_it(tmp_path, capsys, monkeypatch):
    import convergence._cli as cli

    class FutureCancelledError(Exception):
        pass

    FutureCancelledError.__module__ = "distributed.client"

    def lost(*args):
        raise FutureCancelledError("task cancelled")

    monkeypatch.setattr(cli, "_run_studies", lost)
    argv = ["run", "strong-fedorov", "--out", str(tmp_path), "--scheduler", "tcp://10.0.0.9:8786"]
    assert main(argv) == 5
    assert "the Dask scheduler at tcp://10.0.0.9:8786 stopped responding" in capsys.readouterr().err


def test_verdicts_set_the_exit_code(tiny, tmp_path, monkeypatch, capsys):
    import convergence._cli as cli
    from convergence._output import StudyResult
    from verify._common import Verdict

    for verdict, code in ((Verdict.PASS, 0), (Verdict.INCONCLUSIVE, 3), (Verdict.FAIL, 1)):
        monkeypatch.setattr(
            type(cli.STUDIES["strong-fedorov"]),
            "run",
            lambda self, profile, seed, progress, verdict=verdict: _result(StudyResult, verdict, profile, seed),
        )
        assert main([*TINY, "--out", str(tmp_path / verdict.value)]) == code, verdict


def _result(kind, verdict, profile, seed):
    from convergence._statistics import Check

    result = kind(
        "strong-fedorov", profile, seed, {}, [Check("x", 0.0, 0.0, (0.0, 0.0), verdict, {}, false_failure_rate=0.0)]
    )
    assert result.verdict == verdict
    return result


def test_the_committed_reports_are_written_only_when_asked_by_name(tmp_path, capsys, monkeypatch):
    """A full run goes to reports/local/ by default; writing into reports/ needs --profile full spelled out (or
    --replace-committed); a quick run there is refused too."""
    import convergence._cli as cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "_run_studies", lambda args, *rest: print(f"writes {args.out}") or 0)
    assert cli.DEFAULT_OUT["full"] == Path("reports") / "local"
    assert main(["run", "strong-fedorov", "--profile", "full"]) == 0
    assert "writes reports/local" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["run", "strong-fedorov", "--out", "reports"])
    assert "holds the committed full-profile reports" in capsys.readouterr().err
    assert main(["run", "strong-fedorov", "--out", "reports", "--profile", "full"]) == 0
    assert main(["run", "strong-fedorov", "--out", "reports", "--replace-committed"]) == 0


# --- chaos: the faults at random times, one folder, one cache --------------------------------------------------------

FAULTS = ("sigint", "sigkill", "file-size limit", "concurrent writer", "killed worker")


def _launch(out: Path, scheduler: str = "sync", limit: int | None = None) -> subprocess.Popen:
    from tests.test_execution import TINY_RUN

    def small_files():  # the child's file-size limit: writes past it fail with EFBIG (Python ignores SIGXFSZ)
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.Popen(
        [sys.executable, "-c", TINY_RUN, *TINY[:-2], "--out", str(out), "--resume", "--scheduler", scheduler],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=small_files if limit else None,
    )


def _wait_for_the_lock(out: Path, process: subprocess.Popen) -> None:
    """Until ``process`` holds ``out``'s lock (its pid written there) or has ended."""
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if (out / ".lock").read_text().startswith(f"pid {process.pid},"):
                return
        except OSError:
            pass
        time.sleep(0.01)


def _kill_a_worker(process: subprocess.Popen, after: float) -> None:
    """SIGKILL one of the run's dask worker processes ``after`` seconds after both are up."""
    import psutil

    deadline, up = time.monotonic() + 60, None
    while time.monotonic() < deadline and process.poll() is None:
        try:
            workers = [
                p for p in psutil.Process(process.pid).children(recursive=True) if "spawn" in " ".join(p.cmdline())
            ]
        except psutil.Error:
            workers = []
        if len(workers) >= 2:
            up = up or time.monotonic()
            if time.monotonic() - up >= after:
                workers[-1].kill()
                return
        time.sleep(0.05)


def _assert_whole_and_right(out: Path, expected_checks: list) -> None:
    """What a reader finds in ``out`` after the next start's recovery: no report, or one whole run whose numbers are
    the uninterrupted run's and whose index is the one its files give."""
    from convergence._output import index_markdown
    from convergence._studies import HEADLINES

    recover_folder(out)  # what the next run does first, under the lock
    assert not [p.name for p in out.iterdir() if p.name.startswith(".") and p.name not in (".lock", ".cache")]
    found = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    if not found:
        return
    assert found == ["index.md", "run.json", "strong-fedorov.json", "strong-fedorov.md", "strong-fedorov.png"]
    report = json.loads((out / "strong-fedorov.json").read_text())
    assert report["checks"] == expected_checks
    assert (out / "index.md").read_text() == index_markdown(out, HEADLINES)  # written with this run's files


@pytest.mark.slow  # 20 runs of a tiny study in child processes, with dask clusters: about 3 minutes on 2 cores
def test_chaos_every_fault_at_random_times_leaves_one_whole_run_with_the_uninterrupted_numbers(tmp_path):
    rng = np.random.default_rng(52)
    base = tmp_path / "base"
    child = _launch(base)
    _, err = child.communicate(timeout=300)
    assert child.returncode == TINY_EXIT, err
    expected = json.loads((base / "strong-fedorov.json").read_text())["checks"]
    out = tmp_path / "chaos"
    codes: dict[str, list] = {fault: [] for fault in FAULTS}
    for round_ in range(20):
        fault = FAULTS[round_ % len(FAULTS)] if round_ < len(FAULTS) else str(rng.choice(FAULTS))
        delay = float(rng.uniform(0.0, 0.6))  # after the run took the lock (a resumed tiny study takes about 0.5 s)
        if fault == "concurrent writer":
            first, second = _launch(out), _launch(out)
            results = sorted((first.wait(timeout=300), second.wait(timeout=300)))
            assert results in ([2, TINY_EXIT], [TINY_EXIT, TINY_EXIT]), results  # locked out, or one after the other
            code = results[0]
        else:
            scheduler = "processes" if fault == "killed worker" else "sync"
            child = _launch(out, scheduler, limit=64 * 1024 if fault == "file-size limit" else None)
            if fault == "killed worker":
                _kill_a_worker(child, after=2 * delay)
            elif fault in ("sigint", "sigkill"):
                _wait_for_the_lock(out, child)  # the run has begun (Ctrl-C during the imports is __main__'s)
                try:
                    child.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    child.send_signal(signal.SIGINT if fault == "sigint" else signal.SIGKILL)
            code = child.wait(timeout=300)
            err = child.stderr.read()
            allowed = {
                "sigint": {4, TINY_EXIT},
                "sigkill": {-signal.SIGKILL, TINY_EXIT},
                "file-size limit": {2},
                "killed worker": {TINY_EXIT, 5},
            }[fault]
            assert code in allowed, (fault, delay, code, err)
            assert "Traceback" not in err, err
            if code == 2:
                assert "File too large" in err, err
        codes[fault].append(code)
        _assert_whole_and_right(out, expected)
    print(codes)
    # the faults did strike (not every run finished first): some interrupted, some killed, one locked out
    assert 4 in codes["sigint"] and -signal.SIGKILL in codes["sigkill"] and 2 in codes["concurrent writer"], codes
    child = _launch(out)
    assert child.wait(timeout=300) == TINY_EXIT
    _assert_whole_and_right(out, expected)
    assert (out / "strong-fedorov.json").exists()


def test_an_error_raised_inside_distributed_is_the_engines():
    from convergence._runtime import Exit, as_fault

    namespace: dict = {}
    exec(
        compile("def start():\n    raise RuntimeError('Nanny failed to start.')", "/x/distributed/nanny.py", "exec"),
        namespace,
    )
    try:
        namespace["start"]()
    except RuntimeError as error:
        fault = as_fault(error, "processes", "out", "out/.cache")
    assert fault.code == Exit.ENGINE_LOST and str(fault).startswith("the local Dask cluster stopped responding")
    assert as_fault(RuntimeError("boom"), "processes", "out", "out/.cache") is None


def test_a_key_file_others_can_read_or_replace_is_refused(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    (out / ".cache").mkdir(parents=True)
    (out / ".cache" / ".key").write_bytes(b"")
    with pytest.raises(SystemExit):
        main([*TINY, "--out", str(out)])
    assert "readable by its owner only" in capsys.readouterr().err
    (out / ".cache" / ".key").unlink()
    (out / ".cache" / ".key").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SystemExit):
        main([*TINY, "--out", str(out)])
    assert "must be a regular file of this user" in capsys.readouterr().err


def test_a_journal_naming_files_outside_its_folder_is_refused(tmp_path):
    (tmp_path / f"{JOURNAL}.abcdefgh.journal").write_text(json.dumps({"renames": [[".x.abcdefgh.tmp", "../y"]]}))
    with pytest.raises(OSError, match="is not a journal this tool wrote"):
        recover_folder(tmp_path)
