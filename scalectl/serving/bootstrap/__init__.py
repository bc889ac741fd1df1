"""Bootstrap renderers: one server description to cloud-init, a container launch, or an SSH script.

Pure (no I/O, no controller): provider adapters render the form their cloud takes from the launch's
server description.
"""
