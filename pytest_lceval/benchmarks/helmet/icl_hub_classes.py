"""The class names of HELMET's five ICL sets in the order of their Hugging Face hub
``ClassLabel`` (what ``load_icl`` reads as ``features[...].names``): a class's id is its place
here, and HELMET's label map shuffles those ids, so the integer a class is shown as depends on
this order. The local releases carry names only; the orders are those the hub's loading scripts
declare (``CogComp/trec`` 2.0.0 ``coarse_label`` and ``fine_label``, ``PolyAI/banking77``,
``clinc_oos``, ``xingkunliuxtracta/nlu_evaluation_data``), written out as data.

NLU's hub set has 68 intents; the local fold has 64 of them, which keep their hub ids.
"""

from __future__ import annotations


def _names(text: str) -> tuple[str, ...]:
    """The whitespace-separated names of ``text``, in order."""
    return tuple(text.split())


TREC_COARSE = _names("ABBR ENTY DESC HUM LOC NUM")
TREC_FINE = _names("""
ABBR:abb ABBR:exp ENTY:animal ENTY:body ENTY:color ENTY:cremat ENTY:currency ENTY:dismed
ENTY:event ENTY:food ENTY:instru ENTY:lang ENTY:letter ENTY:other ENTY:plant ENTY:product
ENTY:religion ENTY:sport ENTY:substance ENTY:symbol ENTY:techmeth ENTY:termeq ENTY:veh ENTY:word
DESC:def DESC:desc DESC:manner DESC:reason HUM:gr HUM:ind HUM:title HUM:desc LOC:city
LOC:country LOC:mount LOC:other LOC:state NUM:code NUM:count NUM:date NUM:dist NUM:money
NUM:ord NUM:other NUM:period NUM:perc NUM:speed NUM:temp NUM:volsize NUM:weight
""")
BANKING77 = _names("""
activate_my_card age_limit apple_pay_or_google_pay atm_support automatic_top_up
balance_not_updated_after_bank_transfer balance_not_updated_after_cheque_or_cash_deposit
beneficiary_not_allowed cancel_transfer card_about_to_expire card_acceptance card_arrival
card_delivery_estimate card_linking card_not_working card_payment_fee_charged
card_payment_not_recognised card_payment_wrong_exchange_rate card_swallowed
cash_withdrawal_charge cash_withdrawal_not_recognised change_pin compromised_card
contactless_not_working country_support declined_card_payment declined_cash_withdrawal
declined_transfer direct_debit_payment_not_recognised disposable_card_limits
edit_personal_details exchange_charge exchange_rate exchange_via_app extra_charge_on_statement
failed_transfer fiat_currency_support get_disposable_virtual_card get_physical_card
getting_spare_card getting_virtual_card lost_or_stolen_card lost_or_stolen_phone
order_physical_card passcode_forgotten pending_card_payment pending_cash_withdrawal
pending_top_up pending_transfer pin_blocked receiving_money Refund_not_showing_up
request_refund reverted_card_payment? supported_cards_and_currencies terminate_account
top_up_by_bank_transfer_charge top_up_by_card_charge top_up_by_cash_or_cheque top_up_failed
top_up_limits top_up_reverted topping_up_by_card transaction_charged_twice transfer_fee_charged
transfer_into_account transfer_not_received_by_recipient transfer_timing
unable_to_verify_identity verify_my_identity verify_source_of_funds verify_top_up
virtual_card_not_working visa_or_mastercard why_verify_identity wrong_amount_of_cash_received
wrong_exchange_rate_for_cash_withdrawal
""")
CLINC150 = _names("""
restaurant_reviews nutrition_info account_blocked oil_change_how time weather redeem_rewards
interest_rate gas_type accept_reservations smart_home user_name report_lost_card repeat
whisper_mode what_are_your_hobbies order jump_start schedule_meeting meeting_schedule
freeze_account what_song meaning_of_life restaurant_reservation traffic make_call text
bill_balance improve_credit_score change_language no measurement_conversion timer flip_coin
do_you_have_pets balance tell_joke last_maintenance exchange_rate uber car_rental credit_limit
oos shopping_list expiration_date routing meal_suggestion tire_change todo_list card_declined
rewards_balance change_accent vaccines reminder_update food_last change_ai_name bill_due
who_do_you_work_for share_location international_visa calendar translate carry_on book_flight
insurance_change todo_list_update timezone cancel_reservation transactions credit_score
report_fraud spending_history directions spelling insurance what_is_your_name reminder
where_are_you_from distance payday flight_status find_phone greeting alarm order_status
confirm_reservation cook_time damaged_card reset_settings pin_change replacement_card_duration
new_card roll_dice income taxes date who_made_you pto_request tire_pressure how_old_are_you
rollover_401k pto_request_status how_busy application_status recipe calendar_update play_music
yes direct_deposit credit_limit_change gas pay_bill ingredients_list lost_luggage goodbye
what_can_i_ask_you book_hotel are_you_a_bot next_song change_speed plug_type maybe w2
oil_change_when thank_you shopping_list_update pto_balance order_checks travel_alert fun_fact
sync_device schedule_maintenance apr transfer ingredient_substitution calories current_location
international_fees calculator definition next_holiday update_playlist mpg min_payment
change_user_name restaurant_suggestion travel_notification cancel pto_used travel_suggestion
change_volume
""")
NLU = _names("""
alarm_query alarm_remove alarm_set audio_volume_down audio_volume_mute audio_volume_other
audio_volume_up calendar_query calendar_remove calendar_set cooking_query cooking_recipe
datetime_convert datetime_query email_addcontact email_query email_querycontact email_sendemail
general_affirm general_commandstop general_confirm general_dontcare general_explain
general_greet general_joke general_negate general_praise general_quirky general_repeat
iot_cleaning iot_coffee iot_hue_lightchange iot_hue_lightdim iot_hue_lightoff iot_hue_lighton
iot_hue_lightup iot_wemo_off iot_wemo_on lists_createoradd lists_query lists_remove
music_dislikeness music_likeness music_query music_settings news_query play_audiobook
play_game play_music play_podcasts play_radio qa_currency qa_definition qa_factoid qa_maths
qa_stock recommendation_events recommendation_locations recommendation_movies social_post
social_query takeaway_order takeaway_query transport_query transport_taxi transport_ticket
transport_traffic weather_query
""")
