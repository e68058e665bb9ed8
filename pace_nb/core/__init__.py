"""Layer 0: errors, configuration, atomic I/O, the registry, the result schema, validation.

Imports nothing from the rest of the package.
"""
