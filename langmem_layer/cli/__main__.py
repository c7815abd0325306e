"""``python -m langmem_layer.cli``: the same as the ``langmem-layer`` command."""

from langmem_layer.cli.main import main

raise SystemExit(main())
