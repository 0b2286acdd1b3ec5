"""The webhook pages (staff), under /webhooks/."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.webhook_list, name="webhook-list"),
    path("new/", views.webhook_create_page, name="webhook-create"),
    path("<int:pk>/", views.webhook_detail, name="webhook-detail"),
    path("<int:pk>/edit/", views.webhook_edit, name="webhook-edit"),
    path("<int:pk>/delete/", views.webhook_delete_page, name="webhook-delete"),
]
