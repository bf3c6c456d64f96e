"""spark-submit entry points. Each runs as a script (`spark-submit spark_jobs/jobs/<entry>.py`) with the
spark_jobs package shipped as --py-files, so it imports only spark_jobs and what the executors' Python has."""
