"""Tests of firmware_clients/ (a package, so that its conftest is not the bare module
``conftest`` other test directories import)."""
