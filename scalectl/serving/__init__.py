"""The serving path's pure parts: what a model server is told at boot, in every form a provider takes."""
