"""Customer messages shared by the tests: each names a fixture customer and order.

- TEAPOT: a refund the policy issues at once ($48.00 for order O-1001).
- WHEELS: a refund over the $200 limit, held for a supervisor (order O-2002).
- COMPLAINT: nothing a handler or the FAQ can answer: handed off to a person.

An e-mail in the text is only a claim; a test that means the message to act on the
account sends ANA / BEN as the request's authenticated `customer` too.
"""

ANA = "ana.novak@example.com"
BEN = "ben.ortiz@example.com"

TEAPOT = (
    "Hi, this is ana.novak@example.com. My ceramic teapot (order O-1001) arrived broken. "
    "Please refund the full amount."
)
WHEELS = (
    "This is ben.ortiz@example.com. The carbon bike wheels from order O-2002 are cracked. "
    "Refund the full $350 now, please."
)
COMPLAINT = "The courier was rude to my mother; I want to complain."
