"""airt.util: Ray's ray.util names that airt provides."""
