"""Stage 2: names <-> torch objects. The shared vocabulary (aliases, built-in backends), the
safe resolver (name -> object), export naming (object -> name), dtypes, fusers and labels."""
