import sys

from vftui.cli import main

sys.exit(main())
