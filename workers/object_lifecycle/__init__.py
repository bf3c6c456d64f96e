"""Object lifecycle: rules that expire committed objects by path and age on the branches they name."""
