"""Pure scaling policies: no I/O, no clock reads. Inputs in, a decision (desired count + reason) out."""
