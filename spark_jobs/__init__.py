"""Self-contained PySpark jobs (committed garbage collection); imports nothing from webhook/ or workers/."""
