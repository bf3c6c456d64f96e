"""Receiver worker footprint: time to import the WSGI app and the objects a worker holds once it has.

    .venv/bin/python bench/receiver_boot.py      (run from a checkout; prints one JSON line; always quick, so
                                                  `make test` runs it as it is)
"""

import gc
import json
import os
import sys
import time
from pathlib import Path

# The checkout first: run as a script, bench/ is sys.path[0], and bench/webhook.py would shadow the webhook package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.update({"LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9", "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "a",
                   "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "b", "LAKEFS_JANITOR_WEBHOOK_SECRET": "s",
                   "LAKECTL_CONFIG_FILE": os.devnull})
t = time.perf_counter()
import webhook.wsgi  # noqa
boot = time.perf_counter() - t
gc.collect()
print(json.dumps({"boot_s": round(boot, 3), "objects": len(gc.get_objects()) + gc.get_freeze_count(), "modules": len(sys.modules),
                  "celery": "celery" in sys.modules, "lakefs_sdk": "lakefs_sdk" in sys.modules}))
