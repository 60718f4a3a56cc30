"""``python -m backend_spec``: the ``bespec`` command line, for environments without the script."""

from backend_spec.cli import main

if __name__ == "__main__":
    main()
