"""Training one model into one run folder: the loop, the device, the compiled step, the gradient norms."""
