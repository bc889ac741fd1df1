"""Pure sizing math: model and GPU catalogue, KV-cache slots, tuned vLLM arguments, bootstrap rendering."""
