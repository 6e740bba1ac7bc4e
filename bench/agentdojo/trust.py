"""How each AgentDojo tool is marked when wrapped as an onion tool: untrusted (its results are outside content),
read-only (it changes nothing), and why. docs/performance.md shows this table.

The marks follow what each tool returns and does, not where AgentDojo puts its injections: a tool that
returns text other people wrote is untrusted whether or not a suite injects there.
"""

from __future__ import annotations

UNTRUSTED, READ_ONLY, BOTH, NEITHER = (True, False), (False, True), (True, True), (False, False)

TOOLS: dict[str, dict[str, tuple[tuple[bool, bool], str]]] = {
    "banking": {
        "get_iban": (READ_ONLY, "the user's own account"),
        "send_money": (NEITHER, "moves money"),
        "schedule_transaction": (NEITHER, "moves money later"),
        "update_scheduled_transaction": (NEITHER, "changes a standing order"),
        "get_balance": (READ_ONLY, "the bank's own figure"),
        "get_most_recent_transactions": (BOTH, "subjects are written by whoever sent the money"),
        "get_scheduled_transactions": (READ_ONLY, "standing orders the user set up"),
        "read_file": (BOTH, "files (bills, notices) come from outside"),
        "get_user_info": (READ_ONLY, "the bank's record of the user"),
        "update_password": (NEITHER, "changes a credential"),
        "update_user_info": (NEITHER, "changes the user's record"),
    },
    "slack": {
        "get_channels": (BOTH, "anyone in the workspace names a channel"),
        "add_user_to_channel": (NEITHER, "changes membership"),
        "read_channel_messages": (BOTH, "messages other people wrote"),
        "read_inbox": (BOTH, "messages other people wrote"),
        "send_direct_message": (NEITHER, "sends a message"),
        "send_channel_message": (NEITHER, "sends a message"),
        "get_users_in_channel": (READ_ONLY, "membership, kept by the workspace"),
        "invite_user_to_slack": (NEITHER, "adds a user"),
        "remove_user_from_slack": (NEITHER, "removes a user"),
        "get_webpage": (UNTRUSTED, "web pages are outside content; a fetch is a request the site sees (and records)"),
        "post_webpage": (NEITHER, "publishes content"),
    },
    "travel": {
        "get_user_information": (READ_ONLY, "the user's own profile"),
        "get_all_hotels_in_city": (READ_ONLY, "the booking service's listing"),
        "get_hotels_prices": (READ_ONLY, "the booking service's listing"),
        "get_rating_reviews_for_hotels": (BOTH, "reviews other people wrote"),
        "get_hotels_address": (READ_ONLY, "the booking service's listing"),
        "get_all_restaurants_in_city": (READ_ONLY, "the booking service's listing"),
        "get_cuisine_type_for_restaurants": (READ_ONLY, "the booking service's listing"),
        "get_restaurants_address": (READ_ONLY, "the booking service's listing"),
        "get_rating_reviews_for_restaurants": (BOTH, "reviews other people wrote"),
        "get_dietary_restrictions_for_all_restaurants": (READ_ONLY, "the booking service's listing"),
        "get_contact_information_for_restaurants": (READ_ONLY, "the booking service's listing"),
        "get_price_for_restaurants": (READ_ONLY, "the booking service's listing"),
        "check_restaurant_opening_hours": (READ_ONLY, "the booking service's listing"),
        "get_all_car_rental_companies_in_city": (READ_ONLY, "the booking service's listing"),
        "get_car_types_available": (READ_ONLY, "the booking service's listing"),
        "get_rating_reviews_for_car_rental": (BOTH, "reviews other people wrote"),
        "get_car_fuel_options": (READ_ONLY, "the booking service's listing"),
        "get_car_rental_address": (READ_ONLY, "the booking service's listing"),
        "get_car_price_per_day": (READ_ONLY, "the booking service's listing"),
        "create_calendar_event": (NEITHER, "adds an event (and invites its participants)"),
        "search_calendar_events": (BOTH, "events hold invitations other people wrote"),
        "get_day_calendar_events": (BOTH, "events hold invitations other people wrote"),
        "cancel_calendar_event": (NEITHER, "cancels an event"),
        "reserve_hotel": (NEITHER, "books and pays"),
        "reserve_car_rental": (NEITHER, "books and pays"),
        "reserve_restaurant": (NEITHER, "books"),
        "get_flight_information": (READ_ONLY, "the booking service's listing"),
        "send_email": (NEITHER, "sends a message"),
    },
    "workspace": {
        "send_email": (NEITHER, "sends a message"),
        "delete_email": (NEITHER, "deletes"),
        "get_unread_emails": (BOTH, "e-mails other people wrote"),
        "get_sent_emails": (READ_ONLY, "e-mails the user wrote"),
        "get_received_emails": (BOTH, "e-mails other people wrote"),
        "get_draft_emails": (READ_ONLY, "e-mails the user wrote"),
        "search_emails": (BOTH, "e-mails other people wrote"),
        "search_contacts_by_name": (READ_ONLY, "the user's address book"),
        "search_contacts_by_email": (READ_ONLY, "the user's address book"),
        "get_current_day": (READ_ONLY, "the clock"),
        "search_calendar_events": (BOTH, "events hold invitations other people wrote"),
        "get_day_calendar_events": (BOTH, "events hold invitations other people wrote"),
        "create_calendar_event": (NEITHER, "adds an event (and invites its participants)"),
        "cancel_calendar_event": (NEITHER, "cancels an event"),
        "reschedule_calendar_event": (NEITHER, "moves an event"),
        "add_calendar_event_participants": (NEITHER, "invites people"),
        "append_to_file": (NEITHER, "changes a file"),
        "search_files_by_filename": (BOTH, "files are shared by and with other people"),
        "create_file": (NEITHER, "adds a file"),
        "delete_file": (NEITHER, "deletes"),
        "get_file_by_id": (BOTH, "files are shared by and with other people"),
        "list_files": (BOTH, "files are shared by and with other people"),
        "share_file": (NEITHER, "gives someone access"),
        "search_files": (BOTH, "files are shared by and with other people"),
    },
}
"""Suite -> tool -> ((untrusted, read_only), why)."""


def table() -> str:
    """The marks as a Markdown table, one line per tool."""
    lines = ["| suite | tool | untrusted | read-only | why |", "|---|---|---|---|---|"]
    for suite, tools in TOOLS.items():
        for name, ((untrusted, read_only), why) in tools.items():
            lines.append(
                f"| {suite} | `{name}` | {'yes' if untrusted else ''} | {'yes' if read_only else ''} | {why} |"
            )
    return "\n".join(lines)
