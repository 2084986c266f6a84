"""Turning photos into anime: generator, model loaders and the image pipeline."""
