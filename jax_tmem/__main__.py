import sys

from jax_tmem.report import main

sys.exit(main())
