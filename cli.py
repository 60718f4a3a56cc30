"""`python cli.py ...` is the same as the `bespec ...` console script."""

from backend_spec.cli.app import main

if __name__ == "__main__":
    main()
