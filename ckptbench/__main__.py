import sys

from ckptbench.cli.app import main

sys.exit(main())
