"""Where the example scripts write their pictures: the folder named on the command line, else a new
temporary folder (never the current folder unasked). Each script prints the folder it wrote to."""

import argparse
import tempfile
from pathlib import Path


def output_dir(doc):
    """The ``[OUT_DIR]`` argument of a script whose help text is ``doc``, created if missing."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", nargs="?", type=Path, metavar="OUT_DIR",
                        help="folder for the pictures, created if missing (default: a new temporary folder)")
    out = parser.parse_args().out_dir or Path(tempfile.mkdtemp(prefix="flashcute_layout_"))
    out.mkdir(parents=True, exist_ok=True)
    return out
