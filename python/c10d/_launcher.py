"""The c10drun console script of a pip-installed c10d: it runs the launcher binary the wheel
carries (c10d/bin/c10drun), with the same arguments."""
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    binary = os.path.join(here, "bin", "c10drun")
    if not os.access(binary, os.X_OK):
        sys.stderr.write(f"c10drun: this c10d package carries no launcher at {binary}; a package "
                         "installed by cmake --install has it as <prefix>/bin/c10drun\n")
        return 2
    os.execv(binary, ["c10drun"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
