"""ug.nn: neural-network functions (no layer classes)"""

from .dropout import dropout
