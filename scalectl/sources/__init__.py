"""Signal sources: Celery queue depth, vLLM /metrics, Prometheus. Unknown is None, never zero."""
