"""airt's internals that are not the Ray API (the console scripts' entry points)."""
