"""The Django app's own package: its models, migrations, admin and management commands.

Projects name ``"schedule_sdk.contrib.django"`` in ``INSTALLED_APPS``; its ``apps`` module
configures this package as the app (label ``schedule_sdk``). Django lists an app's commands in
``manage.py help`` under the last part of the app's module name, so this package's name is the
heading they appear under: ``[schedule_sdk]``.
"""
