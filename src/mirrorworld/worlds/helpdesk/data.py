"""The helpdesk's seeded data generator.

Everything is drawn from the ``random.Random`` handed in; times are offsets
from the world's epoch. At ``scale=1`` the world has about the size of
tau-bench's retail domain: 500 customers, 1,000 orders, 800 tickets.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mirrorworld.worlds.helpdesk.rules import CATEGORIES, CATEGORY_ROUTING, EPOCH, SLA_HOURS, triage_priority

SCHEMA = Path(__file__).with_name("schema.sql")

FIRST = [
    "Ava",
    "Liam",
    "Noah",
    "Emma",
    "Olivia",
    "Mia",
    "Lucas",
    "Amelia",
    "Ethan",
    "Sofia",
    "Mason",
    "Isla",
    "Logan",
    "Aria",
    "Elijah",
    "Chloe",
    "James",
    "Zoe",
    "Henry",
    "Layla",
    "Jack",
    "Nora",
    "Owen",
    "Lily",
    "Leo",
    "Hannah",
    "Caleb",
    "Grace",
    "Ryan",
    "Ella",
    "Nathan",
    "Ruby",
    "Isaac",
    "Maya",
    "Julian",
    "Stella",
    "Aaron",
    "Clara",
    "Miles",
    "Naomi",
    "Adrian",
    "Alice",
    "Felix",
    "Iris",
    "Victor",
    "Jade",
    "Oscar",
    "Vera",
    "Hugo",
    "Lena",
    "Omar",
    "Priya",
    "Ravi",
    "Mei",
    "Kenji",
    "Yara",
    "Tomas",
    "Ines",
    "Diego",
    "Lucia",
]
LAST = [
    "Smith",
    "Johnson",
    "Brown",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Lopez",
    "Wilson",
    "Anderson",
    "Thomas",
    "Taylor",
    "Moore",
    "Jackson",
    "Martin",
    "Lee",
    "Perez",
    "Thompson",
    "White",
    "Harris",
    "Clark",
    "Lewis",
    "Walker",
    "Hall",
    "Young",
    "King",
    "Wright",
    "Scott",
    "Green",
    "Baker",
    "Adams",
    "Nelson",
    "Hill",
    "Campbell",
    "Mitchell",
    "Roberts",
    "Carter",
    "Phillips",
    "Evans",
    "Turner",
    "Parker",
    "Collins",
    "Edwards",
    "Stewart",
    "Morris",
    "Murphy",
    "Cook",
    "Rogers",
    "Morgan",
    "Cooper",
    "Peterson",
    "Reed",
    "Bailey",
    "Kim",
    "Patel",
    "Nguyen",
    "Okafor",
    "Silva",
    "Novak",
]
CITIES = (
    ("Portland", "97"),
    ("Austin", "78"),
    ("Denver", "80"),
    ("Columbus", "43"),
    ("Raleigh", "27"),
    ("Madison", "53"),
    ("Tucson", "85"),
    ("Boise", "83"),
    ("Omaha", "68"),
    ("Richmond", "23"),
)
STREETS = [
    "Oak",
    "Maple",
    "Cedar",
    "Pine",
    "Elm",
    "Birch",
    "Willow",
    "Lake",
    "Hill",
    "River",
    "Park",
    "Sunset",
    "Main",
    "Church",
    "Mill",
]
DOMAINS = ("example.com", "example.net", "example.org", "mail.example.com")

PRODUCT_WORDS = {
    "electronics": (
        "Wireless Earbuds",
        "Bluetooth Speaker",
        "Smart Watch",
        "Tablet",
        "Noise-Cancelling Headphones",
        "4K Monitor",
        "Mechanical Keyboard",
        "Action Camera",
        "E-Reader",
        "Portable Charger",
    ),
    "home": (
        "Blender",
        "Air Fryer",
        "Coffee Maker",
        "Cast Iron Skillet",
        "Desk Lamp",
        "Duvet Set",
        "Stand Mixer",
        "Robot Vacuum",
        "Knife Set",
        "Air Purifier",
    ),
    "apparel": (
        "Rain Jacket",
        "Wool Sweater",
        "Running Shoes",
        "Denim Jeans",
        "Hiking Boots",
        "Down Parka",
        "Linen Shirt",
        "Yoga Pants",
        "Leather Belt",
        "Sun Hat",
    ),
    "toys": (
        "Building Blocks Set",
        "Puzzle 1000pc",
        "Remote Control Car",
        "Plush Bear",
        "Board Game",
        "Science Kit",
        "Dollhouse",
        "Train Set",
        "Art Easel",
        "Kite",
    ),
    "sports": (
        "Yoga Mat",
        "Tennis Racket",
        "Road Bike Helmet",
        "Dumbbell Pair",
        "Camping Tent",
        "Sleeping Bag",
        "Trail Backpack",
        "Soccer Ball",
        "Fitness Tracker",
        "Kayak Paddle",
    ),
}
PRICE_RANGE = {
    "electronics": (2999, 89999),
    "home": (1999, 59999),
    "apparel": (1999, 34999),
    "toys": (999, 24999),
    "sports": (1499, 49999),
}
ADJECTIVES = ("Classic", "Pro", "Lite", "Max", "Eco", "Urban", "Nordic", "Prime", "Studio", "Trail")

TEAMS = (
    (1, "General Support", "general", 1),
    (2, "Billing", "billing", 1),
    (3, "Shipping & Delivery", "shipping", 1),
    (4, "Technical Support", "technical", 1),
    (5, "Account Security", "account", 1),
    (6, "Escalations", "escalations", 2),
)

TICKET_TEMPLATES: dict[str, tuple[tuple[str, str], ...]] = {
    "account": (
        ("Can't log in to my account", "I keep getting 'invalid password' and the reset email never arrives."),
        ("Unknown sign-in on my account", "I got an alert about a sign-in from a device I don't own. Was I hacked?"),
        ("Account locked", "My account says it is locked after too many attempts. Please unlock it."),
    ),
    "billing": (
        ("Charged twice for one order", "My card statement shows two charges for the same order."),
        ("Wrong amount charged", "I was charged more than the price shown at checkout."),
        ("Need an invoice", "Please send me a VAT invoice for my last order, my payment was declined once."),
    ),
    "shipping": (
        ("Where is my parcel?", "Tracking has not updated for five days. Is my parcel lost?"),
        ("Package delivered to wrong address", "Tracking says delivered but nothing arrived at my door."),
        ("Delivery is late", "My order was supposed to arrive last week and it is still not here."),
    ),
    "technical": (
        ("Device won't turn on", "The device I bought does not power on even after charging overnight."),
        ("App keeps crashing", "The companion app crashes every time I try to pair the device."),
        ("Setup help", "I can't get the setup to finish, it stops at the Wi-Fi step with an error."),
    ),
    "returns": (
        ("Need a return label", "How do I get a return label? I want to send an item back."),
        ("Exchange for another size", "Can I exchange the item for a bigger size instead of returning it?"),
        ("Status of my return", "I sent my return two weeks ago. Has it been received?"),
    ),
    "general": (
        ("Question about gift wrapping", "Do you offer gift wrapping for orders?"),
        ("Feedback on your store", "Just wanted to say the checkout was really smooth. Thanks!"),
        ("Do you ship to Canada?", "I'm moving to Canada next month. Can I still order from you?"),
    ),
}

TIME = "%Y-%m-%dT%H:%M:%SZ"
EPOCH_DT = datetime.strptime(EPOCH, TIME)


def at(dt: datetime) -> str:
    return dt.strftime(TIME)


def ago(days: float = 0, hours: float = 0) -> str:
    return at(EPOCH_DT - timedelta(days=days, hours=hours))


def kb_articles(rng: random.Random) -> list[tuple[str, str, str]]:
    """Knowledge-base articles (title, category, body); figures drawn from ``rng``."""
    std_days, std_cost = rng.choice([(5, "4.99"), (6, "5.99"), (4, "6.49")])
    exp_days, exp_cost = rng.choice([(2, "14.99"), (1, "19.99"), (2, "12.49")])
    free_over = rng.choice(["35.00", "49.00", "50.00", "75.00"])
    price_adj = rng.choice([7, 10, 14])
    gift_years = rng.choice([3, 5])
    wrap_cost = rng.choice(["3.99", "4.99", "5.49"])
    restock = rng.choice([10, 15])
    intl = rng.choice(["Canada and Mexico", "Canada, Mexico and the United Kingdom"])
    label_days = rng.choice([3, 5, 7])
    refund_days = rng.choice([5, 7, 10])
    arts = [
        (
            "Shipping options and costs",
            "shipping",
            f"Standard shipping takes {std_days} business days and costs ${std_cost}. Express shipping takes "
            f"{exp_days} business days and costs ${exp_cost}. Standard shipping is free on orders over ${free_over}.",
        ),
        ("International shipping", "shipping", f"We ship to {intl}. Duties and taxes are charged at checkout."),
        (
            "Price adjustments",
            "billing",
            f"If an item you bought drops in price within {price_adj} days of delivery, we refund the difference.",
        ),
        (
            "Gift cards",
            "billing",
            f"Gift cards are valid for {gift_years} years from purchase and cannot be exchanged for cash.",
        ),
        ("Gift wrapping", "general", f"Gift wrapping is available at checkout for ${wrap_cost} per item."),
        (
            "Restocking fee for opened electronics",
            "returns",
            f"Opened electronics returned without a defect carry a restocking fee of {restock} percent.",
        ),
        (
            "Return labels",
            "returns",
            f"Prepaid return labels are emailed within {label_days} business days of a return request.",
        ),
        (
            "Refund processing time",
            "billing",
            f"Refunds reach the original payment method within {refund_days} business days.",
        ),
    ]
    for cat, (window, warranty) in CATEGORIES.items():
        arts.append(
            (
                f"Return policy: {cat}",
                "returns",
                f"Items in the {cat} category can be returned within {window} days of delivery.",
            )
        )
        text = (
            f"{cat.capitalize()} items carry a {warranty}-month manufacturer warranty."
            if warranty
            else f"{cat.capitalize()} items carry no manufacturer warranty."
        )
        arts.append((f"Warranty: {cat}", "technical", text))
    return arts


Row = tuple[Any, ...]


def generate(conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
    """Create the helpdesk schema and fill it.

    The tables are drawn in a fixed order from the one ``rng`` (customers,
    products, agents, orders with their lines and refunds, tickets with their
    messages, articles), each from the ones before it; the order of the draws
    is part of the image, so a change to it is a change of the world's data.
    """
    conn.executescript(SCHEMA.read_text(encoding="utf-8"))
    n_customers = max(20, round(500 * scale))
    n_orders = max(40, round(1000 * scale))
    n_tickets = max(30, round(800 * scale))

    customers = _customers(rng, n_customers)
    conn.executemany("INSERT INTO customers VALUES (?,?,?,?,?,?,?,?,?,?,?)", customers)
    products = _products(rng)
    conn.executemany("INSERT INTO products VALUES (?,?,?,?,?,?,?)", products)
    conn.executemany("INSERT INTO teams VALUES (?,?,?,?)", TEAMS)
    agents = _agents(rng)
    conn.executemany("INSERT INTO agents VALUES (?,?,?,?,?)", agents)
    orders, lines, refunds = _orders(rng, n_orders, customers, products)
    conn.executemany("INSERT INTO orders VALUES (?,?,?,?,?,?,?,?)", orders)
    conn.executemany("INSERT INTO order_lines VALUES (?,?,?,?,?,?)", lines)
    conn.executemany("INSERT INTO refunds VALUES (?,?,?,?,?,?,?,?)", refunds)
    tickets, messages = _tickets(rng, n_tickets, customers, agents, orders)
    conn.executemany("INSERT INTO tickets VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", tickets)
    conn.executemany("INSERT INTO ticket_messages VALUES (?,?,?,?,?,?,?)", messages)
    articles = [(i, t, c, b, ago(days=rng.randint(10, 400))) for i, (t, c, b) in enumerate(kb_articles(rng), 1)]
    conn.executemany("INSERT INTO articles VALUES (?,?,?,?,?)", articles)


def _customers(rng: random.Random, n: int) -> list[Row]:
    """``n`` customers with unique emails and phone numbers; ids from 1."""
    customers: list[Row] = []
    emails: set[str] = set()
    phones: set[str] = set()
    for cid in range(1, n + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first.lower()}.{last.lower()}{rng.randint(1, 999)}@{rng.choice(DOMAINS)}"
        while email in emails:
            email = f"{first.lower()}.{last.lower()}{rng.randint(1000, 99999)}@{rng.choice(DOMAINS)}"
        emails.add(email)
        phone = f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
        while phone in phones:
            phone = f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
        phones.add(phone)
        city, zip_prefix = rng.choice(CITIES)
        tier = rng.choices(("standard", "gold", "platinum"), (70, 22, 8))[0]
        customers.append(
            (
                cid,
                f"{first} {last}",
                email,
                phone,
                f"{rng.randint(1, 9999)} {rng.choice(STREETS)} St",
                city,
                f"{zip_prefix}{rng.randint(100, 999)}",
                tier,
                ago(days=rng.randint(30, 1500)),
                f"{rng.randint(0, 9999):04d}",
                rng.randint(0, 100),
            )
        )
    return customers


def _products(rng: random.Random) -> list[Row]:
    """Two products per catalogue word, each with an adjective drawn for it; prices end in .99."""
    products: list[Row] = []
    pid = 0
    for cat, names in PRODUCT_WORDS.items():
        window, warranty = CATEGORIES[cat]
        lo, hi = PRICE_RANGE[cat]
        for name in names:
            for adj in rng.sample(ADJECTIVES, 2):
                pid += 1
                price = rng.randint(lo // 100, hi // 100) * 100 + 99
                products.append((pid, f"{cat[:3].upper()}-{pid:04d}", f"{adj} {name}", cat, price, window, warranty))
    return products


def _agents(rng: random.Random) -> list[Row]:
    """Five agents per team, the first of each its supervisor."""
    agents: list[Row] = []
    aid = 0
    for team_id, _, queue, _ in TEAMS:
        for k in range(5):
            aid += 1
            first, last = rng.choice(FIRST), rng.choice(LAST)
            agents.append(
                (
                    aid,
                    f"{first} {last}",
                    f"{queue}.{aid}@northwind.example",
                    team_id,
                    "supervisor" if k == 0 else "agent",
                )
            )
    return agents


def _orders(
    rng: random.Random, n: int, customers: list[Row], products: list[Row]
) -> tuple[list[Row], list[Row], list[Row]]:
    """``n`` orders with their lines, and the refunds of the cancelled and refunded ones.

    An order's status decides its dates: placed within the last day and a
    half, shipped within five days, delivered or refunded within 120 days. A
    cancelled order has one refund of its total; a refunded one a refund per
    line, each for the whole line.
    """
    orders: list[Row] = []
    lines: list[Row] = []
    refunds: list[Row] = []
    line_id = refund_id = 0
    for oid in range(1, n + 1):
        cust = rng.choice(customers)
        placed_days = rng.uniform(0.2, 120)
        status = rng.choices(("placed", "shipped", "delivered", "cancelled", "refunded"), (8, 10, 66, 6, 10))[0]
        if status == "placed":
            placed_days = rng.uniform(0.1, 1.5)
        elif status == "shipped":
            placed_days = rng.uniform(1.5, 5)
        elif status in ("delivered", "refunded"):
            placed_days = rng.uniform(4, 120)
        placed = EPOCH_DT - timedelta(days=placed_days)
        shipped = placed + timedelta(days=1) if status in ("shipped", "delivered", "refunded") else None
        delivered = placed + timedelta(days=rng.randint(2, 4)) if status in ("delivered", "refunded") else None
        total = 0
        order_lines = []
        for prod in rng.sample(products, rng.choices((1, 2, 3), (55, 30, 15))[0]):
            line_id += 1
            qty = rng.choices((1, 2), (85, 15))[0]
            refunded = prod[4] * qty if status in ("cancelled", "refunded") else 0
            order_lines.append((line_id, oid, prod[0], qty, prod[4], refunded))
            total += prod[4] * qty
        lines.extend(order_lines)
        orders.append(
            (
                oid,
                cust[0],
                status,
                at(placed),
                at(shipped) if shipped else None,
                at(delivered) if delivered else None,
                total,
                f"{cust[4]}, {cust[5]} {cust[6]}",
            )
        )
        if status in ("cancelled", "refunded"):
            when = (delivered or placed) + timedelta(days=1)
            if status == "cancelled":
                refund_id += 1
                refunds.append((refund_id, oid, None, total, "cancellation", None, None, at(when)))
            else:
                for ln in order_lines:
                    refund_id += 1
                    refunds.append(
                        (refund_id, oid, ln[0], ln[5], rng.choice(("damaged", "changed_mind")), None, None, at(when))
                    )
    return orders, lines, refunds


def _tickets(
    rng: random.Random, n: int, customers: list[Row], agents: list[Row], orders: list[Row]
) -> tuple[list[Row], list[Row]]:
    """``n`` past tickets, each routed to its category's team, with its messages.

    Every ticket has the customer's message and a public acknowledgement from
    its assignee; three in ten also an internal note. Six in ten of the
    tickets of a customer with orders name one of them.
    """
    tickets: list[Row] = []
    messages: list[Row] = []
    msg_id = 0
    team_by_queue = {q: tid for tid, _, q, _ in TEAMS}
    agents_by_team: dict[int, list[int]] = {}
    for a in agents:
        agents_by_team.setdefault(a[3], []).append(a[0])
    cust_orders: dict[int, list[int]] = {}
    for o in orders:
        cust_orders.setdefault(o[1], []).append(o[0])
    for tid in range(1, n + 1):
        cust = rng.choice(customers)
        category = rng.choice(tuple(TICKET_TEMPLATES))
        subject, body = rng.choice(TICKET_TEMPLATES[category])
        created = EPOCH_DT - timedelta(days=rng.uniform(3, 200))
        priority = triage_priority(category, cust[7])
        status = rng.choices(("closed", "solved", "pending"), (70, 22, 8))[0]
        team = team_by_queue[CATEGORY_ROUTING[category][0]]
        assignee = rng.choice(agents_by_team[team])
        order_id = rng.choice(cust_orders[cust[0]]) if cust[0] in cust_orders and rng.random() < 0.6 else None
        sla = created + timedelta(hours=SLA_HOURS[priority])
        updated = created + timedelta(hours=rng.uniform(1, 48))
        tickets.append(
            (
                tid,
                cust[0],
                order_id,
                rng.choice(("email", "chat", "phone", "web")),
                subject,
                category,
                status,
                priority,
                team,
                assignee,
                category,
                at(sla),
                at(created),
                at(updated),
                None,
            )
        )
        msg_id += 1
        messages.append((msg_id, tid, "customer", cust[0], 1, body, at(created)))
        msg_id += 1
        messages.append(
            (
                msg_id,
                tid,
                "agent",
                assignee,
                1,
                f"Hi {cust[1].split()[0]}, thanks for reaching out. We're looking into this.",
                at(created + timedelta(hours=1)),
            )
        )
        if rng.random() < 0.3:
            msg_id += 1
            messages.append(
                (
                    msg_id,
                    tid,
                    "agent",
                    assignee,
                    0,
                    "Checked the account history; nothing unusual.",
                    at(created + timedelta(hours=2)),
                )
            )
    return tickets, messages
