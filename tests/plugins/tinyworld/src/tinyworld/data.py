"""The library's seeded data: members, books and their loans.

Everything comes from the ``random.Random`` the world passes in, so a data
seed gives the same library in any process. Loan ``i`` has been renewed
``i % 3`` times, so every library has loans that may and loans that may not be
renewed; due dates fall from five days ago to twelve days ahead.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from tinyworld.rules import TODAY, later

SCHEMA = Path(__file__).resolve().parent / "schema.sql"

FIRST = ("Ada", "Bo", "Cleo", "Dev", "Edda", "Finn", "Gus", "Hana", "Ines", "Jun", "Kai", "Lena")
LAST = ("Moss", "Nash", "Ortiz", "Park", "Quinn", "Reyes", "Shah", "Tran", "Ueda", "Voss")
BOOKS = (
    ("The Salt Road", "M. Ibarra"),
    ("Small Engines", "T. Okafor"),
    ("A Field Guide to Moss", "R. Lind"),
    ("Night Trains", "C. Duval"),
    ("The Patient Garden", "H. Sato"),
    ("Counting Stars", "E. Brandt"),
    ("Paper Boats", "L. Moreau"),
    ("The Last Lighthouse", "P. Quist"),
    ("Winter Bread", "A. Novak"),
    ("River of Glass", "S. Adeyemi"),
)


def generate(conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
    """Create the schema and fill it: about twelve members at scale 1, two or three loans each."""
    conn.executescript(SCHEMA.read_text(encoding="utf-8"))
    conn.executemany(
        "INSERT INTO books (id, title, author) VALUES (?, ?, ?)", [(i + 1, *b) for i, b in enumerate(BOOKS)]
    )
    loan_id = 0
    for member_id in range(1, max(4, round(12 * scale)) + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first.lower()}.{last.lower()}{member_id}@example.org"
        pin = f"{rng.randrange(10_000):04d}"
        conn.execute(
            "INSERT INTO members (id, name, email, card_pin) VALUES (?, ?, ?, ?)",
            (member_id, f"{first} {last}", email, pin),
        )
        for book_id in rng.sample(range(1, len(BOOKS) + 1), rng.randint(2, 3)):
            loan_id += 1
            due = later(TODAY, rng.randint(-5, 12))
            conn.execute(
                "INSERT INTO loans (id, member_id, book_id, due_on, renewals) VALUES (?, ?, ?, ?, ?)",
                (loan_id, member_id, book_id, due, loan_id % 3),
            )
