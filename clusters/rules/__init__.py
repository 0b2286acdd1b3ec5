"""Finding rules of the scheduler layer: typed facts in (`types`), finding facts out, one pure
function per finding type, listed in `registry.RULES`."""
