"""Console scripts; they only parse arguments and call into the package."""
