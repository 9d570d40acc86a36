"""``python -m lab launch`` and lab.cluster.cli.main, with real ranks."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cluster import cli

REPO = Path(__file__).resolve().parents[2]
FAKE = [sys.executable, str(REPO / "tests" / "bin" / "fake_rank.py")]


def _main(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command_name"))
    return cli.main(parser.parse_args(["launch", *argv]))


def _lab(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", "launch", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_python_m_lab_launch_streams_tagged_lines_and_ends_with_run_dir() -> None:
    done = _lab("-np", "2", "--experiment", "cli", "--", *FAKE, "--lines", "3", "--progress")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    for r in (0, 1):
        assert [x for x in out if x.startswith(f"[{r}] rank {r} line")] == [
            f"[{r}] rank {r} line {i}" for i in range(3)
        ]
        assert f"[{r}] rank {r} progress 3/5" in out
        assert f"[{r}] rank {r} stderr note" in done.stderr.splitlines()
    run_dir = Path(out[-1])
    assert run_dir.parent.name == "cli" and (run_dir / "manifest.json").is_file()
    logged = (run_dir / "rank-1.log").read_text().splitlines()
    assert next(x for x in logged if "stderr" not in x) == "rank 1 line 0"


def test_failed_run_exits_with_the_rank_exit_code() -> None:
    done = _lab("-np", "2", "--grace", "1", "--", *FAKE, "--exitcode", "3@1", "--sleep", "60")
    assert done.returncode == 3
    assert "rank 1 on localhost" in done.stderr and "exit code 3" in done.stderr
    assert "rank 1 failing with 3" in done.stderr
    assert Path(done.stdout.splitlines()[-1]).is_dir()


@pytest.mark.slow
def test_timeout_exits_124(capsys) -> None:
    code = _main("-np", "1", "--timeout", "1", "--grace", "1", "--", *FAKE, "--sleep", "60")
    out = capsys.readouterr()
    assert code == 124 and "timed out after 1s" in out.err
    assert Path(out.out.splitlines()[-1]).is_dir()


def test_env_and_options_reach_the_ranks(capsys) -> None:
    code = _main(
        "-np", "2", "--env", "GREETING=hi there", "--option", "master_port=29611",
        "--", "sh", "-c", 'echo "$GREETING $RANK $MASTER_PORT"',
    )  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert sorted(out[:-1]) == ["[0] hi there 0 29611", "[1] hi there 1 29611"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-np", "0"], "np=0"),
        (["-np", "5", "-H", "localhost:2"], "more ranks than the 2 slots"),
        (["--launcher", "nope"], "launcher='nope' is not allowed; allowed:"),
        (["-H", "h1:2,,h2"], "has an empty entry"),
        (["-H", "h1:zero"], "not a whole number"),
        (["--cluster", "no-such-profile"], "cluster profile 'no-such-profile' not found"),
        (["--env", "NOEQUALS"], "--env"),
        (["--experiment", "../x"], "experiment"),
        (["--timeout", "0"], "timeout"),
    ],
)
def test_bad_input_fails_before_anything_starts(argv: list[str], message: str, capsys) -> None:
    code = _main(*argv, "--", *FAKE)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert not (Path(os.environ["DISTLAB_RESULTS"]) / "runs").exists()


def test_missing_command(capsys) -> None:
    assert _main("-np", "1") == 2
    assert "command" in capsys.readouterr().err
