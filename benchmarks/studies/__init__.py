"""Finished investigations, frozen: see README.md beside this file."""
