"""What every domain shares: settings, Services, the Redis connection, the lakeFS client and documents, the Celery task base, CLI helpers, metrics, locks, URIs."""
