"""The package's ground floor: its one-line messages, option values, where the installed C++ side lives,
import hooks on torch, and the guard against sub-interpreters. Imports nothing of steptrace but _core."""
