"""python -m flashcute.layout: every command prints and draws; malformed input exits 2 with one line."""

import subprocess
import sys

import pytest

from flashcute.layout.__main__ import COMMANDS, _parser, main

MMA = ["--mma", "SM80_16x8x16_F32BF16BF16F32_TN", "--threads", "4,1,1", "--permutation", "64,16,16"]


def test_module_entry_point(tmp_path):
    out = tmp_path / "layout.png"
    r = subprocess.run([sys.executable, "-m", "flashcute.layout", "(4,(2,4)):(2,(1,8))", "-o", str(out), "--svg"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("(4,(2,4)):(2,(1,8))\n")
    assert r.stdout.count("(4,(2,4)):(2,(1,8))") == 1   # print_layout's table starts with it: printed once
    assert "|  0 |  1 |  8 |  9 | 16 | 17 | 24 | 25 |" in r.stdout       # print_layout's table
    assert out.read_bytes()[:4] == b"\x89PNG" and out.with_suffix(".svg").is_file()


def test_layout_memory_view(tmp_path, capsys):
    assert main(["(4,8):(8,1)", "--memory", "-o", str(tmp_path / "m.svg")]) == 0
    assert (tmp_path / "m.svg").read_text().lstrip().startswith("<?xml")


def test_mma_command(tmp_path, capsys):
    assert main(["mma", "SM80_16x8x16_F32BF16BF16F32_TN", "--threads", "4,1,1", "--permutation", "64,16,16"]) == 0
    out = capsys.readouterr().out
    assert "ThrLayoutVMNK:  (_32,_4,_1,_1):(_1,_32,_0,_0)" in out
    assert "LayoutC_TV: ((_4,_8,_4),((_2,_2),(_1,_2))):((_128,_1,_16),((_64,_8),(_0,_512)))" in out
    assert main(["mma", "SM80_16x8x8_F32F16F16F32_TN", "--threads", "(_2,_2,_1):(_2,_1,_0)",
                 "-o", str(tmp_path / "mma.png")]) == 0
    assert (tmp_path / "mma.png").is_file()


def test_copy_command(capsys):
    assert main(["copy", "SM75_U32x4_LDSM_N", "--type", "half_t", "--operand", "A"] + MMA) == 0
    out = capsys.readouterr().out
    assert "LayoutS_TV: ((_16,_2,_4),(_8,_1)):((_1,_512,_16),(_64,_0))" in out
    assert main(["copy", "SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>", "--thr", "(_16,_8):(_8,_1)",
                 "--val", "(_1,_8):(_0,_1)"]) == 0
    assert "Tiler_MN:       (_16,_64)" in capsys.readouterr().out


def test_banks_command(tmp_path, capsys):
    assert main(["banks", "(_32,_8):(_8,_1)", "--bytes", "4", "-o", str(tmp_path / "b.png")]) == 0
    assert "bank conflicts 56  worst 8-way" in capsys.readouterr().out
    assert main(["banks", "(_32,_8):(_9,_1)", "--bytes", "4"]) == 0
    assert "bank conflicts 0  worst 1-way" in capsys.readouterr().out
    assert main(["banks", "Sw<3,3,3> o _0 o (_64,_64):(_64,_1)", "--bytes", "2", "--copy", "SM75_U32x4_LDSM_N"]
                + MMA) == 0
    assert "ldmatrix.x4: 16 instruction(s)" in capsys.readouterr().out


def test_tiling_and_flash_commands(tmp_path, capsys):
    assert main(["tiling", "2000", "64", "--tile", "128", "64", "-o", str(tmp_path / "t.png")]) == 0
    assert "16 x 1" in capsys.readouterr().out
    assert main(["flash", "--seqlen-q", "300", "--seqlen-k", "500", "--block", "128", "128", "--causal",
                 "-o", str(tmp_path / "f.png")]) == 0
    assert (tmp_path / "t.png").is_file() and (tmp_path / "f.png").is_file()


@pytest.mark.parametrize("argv, message", [
    (["(4,(2,4):(2,(1,8))"], "cannot parse"),
    (["(4,8):(8,1)", "-o", "x.jpg"], ".png or .svg"),
    (["(2,2,2):(1,2,4)", "-o", "x.png"], "rank"),
    (["mma", "SM80_16x8x32_F32BF16BF16F32_TN"], "unknown MMA atom"),
    (["mma", "SM80_16x8x16_F32BF16BF16F32_TN", "--threads", "4,x"], "--threads"),
    (["copy", "SM75_U32x4_LDSM_N", "--type", "half"], "unknown value type"),
    (["copy", "SM75_U32x4_LDSM_N"], "--thr"),
    (["copy", "SM75_U32x4_LDSM_N", "--operand", "B", "--mma", "SM80_16x8x16_F32BF16BF16F32_TN"], "too few values"),
    (["banks", "(_32,_8):(_8,_1)", "--bytes", "4", "--bits", "128", "--order", "col"], "contiguous"),
    (["flash", "--seqlen-q", "100", "--seqlen-k", "100", "--m-block", "3"], "m_block"),
])
def test_malformed_input_exits_2_with_a_message(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["tiling", "2000"])
    assert e.value.code == 2


def test_a_layout_that_is_not_rank_2_is_printed_once(capsys):
    assert main(["(4,2,2):(1,4,8)"]) == 0
    assert capsys.readouterr().out == "(4,2,2):(1,4,8)\n"


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_option_has_help(command, capsys):
    parser = _parser(command)
    assert parser.description
    assert [a.dest for a in parser._actions if not a.help] == []
    with pytest.raises(SystemExit) as e:
        main(([command] if command else []) + ["--help"])
    assert e.value.code == 0
    assert parser.description.split(".")[0] in " ".join(capsys.readouterr().out.split())
